"""Repository evidence against a file of another encoding: every sample × every sibling sample.

    python benchmarks/bench_encodings_siblings_sweep.py [--same-script-lead BITS]

The samples are the real-text sentences of tests/support/textcorpus.py in their legacy encodings
(the Hypothesis property's). For each target sample and each sibling sample of another encoding
family: three sibling JSON files of the sibling text, kept when their own evidence decided them by
≥ 20 bits (the tests' sibling_files), and slices of the target (4–40 characters at 30 starts) as {"description": …}. Only
slices undecided alone count. Printed by the number of non-ASCII characters in the slice: how many
were tried, converted to their own text (the siblings' encoding reads them the same), and converted
with the siblings' encoding to other text, each such case listed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from decode_doctor.checks.encodings import siblings as repository
from decode_doctor.checks.encodings.readings import family_of
from decode_doctor.checks.encodings.siblings import Sibling, decide_with_siblings
from decode_doctor.checks.encodings.textenc import Status, decide
from tests.test_encodings import SAMPLES
from tests.test_encodings_siblings import sibling_files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--same-script-lead", type=float, default=repository.SAME_SCRIPT_LEAD_BITS)
    args = parser.parse_args()
    repository.SAME_SCRIPT_LEAD_BITS = args.same_script_lead
    tried: Counter[int] = Counter()
    right: Counter[int] = Counter()
    wrong: Counter[int] = Counter()
    cache: dict[tuple[str, str], list[Sibling]] = {}
    for (text, encoding), (sibling_text, sibling_encoding) in itertools.product(SAMPLES, SAMPLES):
        if family_of(encoding) == family_of(sibling_encoding):
            continue
        if (sibling_text, sibling_encoding) not in cache:
            cache[(sibling_text, sibling_encoding)] = sibling_files(sibling_text, sibling_encoding)
        siblings = cache[(sibling_text, sibling_encoding)]
        if len(siblings) < 2:
            continue
        for start, length in itertools.product(range(0, 60, 2), (4, 6, 10, 20, 40)):
            piece = text[start : start + length]
            wide = min(sum(ord(c) > 0x7F for c in piece), 5)
            data = json.dumps({"description": piece}, ensure_ascii=False).encode(encoding)
            if not wide or decide(data, ".json").status == Status.CONVERT:
                continue
            tried[wide] += 1
            verdict = decide_with_siblings(data, ".json", siblings).verdict
            if verdict is None or verdict.text is None:
                continue
            got = json.loads(verdict.text)["description"]
            if got == piece:
                right[wide] += 1
            else:
                wrong[wide] += 1
                print(f"  {encoding} beside {sibling_encoding} siblings: {piece!r} converted as {verdict.encoding}: {got!r}")
    print(f"\nsame-script lead: {args.same_script_lead} bits")
    print(f"{'non-ASCII chars':>16} {'tried':>7} {'own text':>9} {'other text (siblings encoding)':>32}")
    for wide in sorted(tried):
        label = f"{wide}{'+' if wide == 5 else ''}"
        print(f"{label:>16} {tried[wide]:>7} {right[wide]:>9} {wrong[wide]:>32}")
    print(f"{'all':>16} {sum(tried.values()):>7} {sum(right.values()):>9} {sum(wrong.values()):>32}")


if __name__ == "__main__":
    main()
