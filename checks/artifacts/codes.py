"""The model-artifacts check's codes, each with its explanation in fixed sections."""

from __future__ import annotations

from decode_doctor.engine import Code, CommandsParams, FixableCode, Severity

REDOWNLOAD = (
    "Display-only: for a model in the Hugging Face cache decode-doctor prints the huggingface-cli command that "
    "downloads the file again (it never downloads for you)."
)

DOWNLOAD_WHY = "Loaders fail on it, after minutes of loading the other shards, or worse, load garbage weights."


MDL001 = FixableCode[CommandsParams](
    "MDL001",
    "A shard the index names is missing",
    Severity.ERROR,
    what="model.safetensors.index.json maps tensors to a shard file that is not there.",
    why=DOWNLOAD_WHY,
    fix_by_hand="Download the named shard again (huggingface-cli download ORG/NAME FILE), and compare the file count with the hub's.",
    params=CommandsParams,
    fix_safety=REDOWNLOAD,
    example="model.safetensors.index.json names model-00003-of-00004.safetensors, which is not in the directory.",
)

MDL002 = FixableCode[CommandsParams](
    "MDL002",
    "A safetensors file is truncated",
    Severity.ERROR,
    what="The file is shorter than its own header says: its last tensor ends past the end of the file.",
    why=DOWNLOAD_WHY,
    fix_by_hand="Download the file again and compare its size and sha256 with the hub's (decode-doctor check --verify-hashes).",
    params=CommandsParams,
    fix_safety=REDOWNLOAD,
    example="model-00002-of-00004.safetensors is 3.1 GB where its header's last tensor ends at 4.9 GB: an interrupted download.",
)

MDL003 = Code(
    "MDL003",
    "A model file is malformed",
    Severity.ERROR,
    what="A safetensors header that is not valid JSON or whose tensors overlap or leave gaps, bytes after the last tensor, "
    "or a config, index or tokenizer config that does not parse.",
    why='The safetensors library and transformers refuse such files ("InvalidOffset", "MetadataIncompleteBuffer", JSON errors).',
    fix_by_hand="Download the file again; if it was edited by hand, restore the original.",
    example="config.json ends in the middle of an object: json.loads fails at line 41 column 1.",
)

MDL004 = Code(
    "MDL004",
    "A GGUF file is truncated or malformed",
    Severity.ERROR,
    what="The GGUF header is damaged, or the tensor data it describes runs past the end of the file.",
    why='llama.cpp fails to load it ("tensor data is not within file bounds"), usually after a cut download.',
    fix_by_hand="Download the file again and compare its size with the source's.",
    example="qwen2-7b-q4_k_m.gguf is 2.1 GB where its tensor table needs 4.7 GB.",
)

MDL005 = FixableCode[CommandsParams](
    "MDL005",
    "An unfinished download",
    Severity.ERROR,
    what="A *.incomplete file: the Hugging Face hub client writes downloads under that name and renames them when complete.",
    why="The file the model needs is not complete; loading fails or, with the partial file renamed by hand, reads garbage.",
    fix_by_hand="Run the download again: the hub client resumes it.",
    params=CommandsParams,
    fix_safety=REDOWNLOAD,
    example="The cache's blobs/ holds 7c1a…e2.incomplete (1.4 GB so far) from a download that was killed.",
)

MDL006 = FixableCode[CommandsParams](
    "MDL006",
    "A cache snapshot links to a missing blob",
    Severity.ERROR,
    what="In the Hugging Face cache, snapshots/<revision>/<file> is a link to blobs/<hash>, and that blob is gone "
    "(deleted, or never finished).",
    why="The file looks present in the snapshot, but every read of it fails.",
    fix_by_hand="Download the file again (huggingface-cli download ORG/NAME FILE --revision REVISION).",
    params=CommandsParams,
    fix_safety=REDOWNLOAD,
    example="snapshots/<rev>/model-00001-of-00002.safetensors links to ../../blobs/3f2e…, which was pruned.",
)

MDL007 = FixableCode[CommandsParams](
    "MDL007",
    "A file's content does not match its hash",
    Severity.ERROR,
    what="--verify-hashes read the file whole: its sha256 (or git blob sha1) differs from the one the hub gave "
    "(the cache's blob name, or the download metadata).",
    why="The weights are corrupted: a flipped byte in a tensor silently changes the model's outputs.",
    fix_by_hand="Delete the file and download it again.",
    params=CommandsParams,
    fix_safety=REDOWNLOAD,
    example="--verify-hashes: model-00001-of-00004.safetensors has sha256 9b1d… while its cache blob is named 4e7a…: a flipped byte on "
    "disk.",
)

MDL010 = Code(
    "MDL010",
    "The served context is beyond what the model was trained for",
    Severity.ERROR,
    what="--context is larger than max_position_embeddings (or the GGUF's context_length), and no rope_scaling in "
    "the config stretches the positions that far.",
    why="Positions past the trained window are out of distribution: output degrades into repetition and "
    "gibberish, and vLLM refuses a max_model_len above it unless forced (VLLM_ALLOW_LONG_MAX_MODEL_LEN).",
    fix_by_hand="Serve at most the trained context, or add the rope_scaling the model card describes (for Qwen2.5: "
    '{"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}).',
    example="--context 32768 for Llama-2-7B (max_position_embeddings 4096, no rope_scaling): quality falls apart past 4,096 tokens, "
    "and vLLM refuses to start.",
)

MDL011 = Code(
    "MDL011",
    "rope_scaling is inconsistent",
    Severity.WARNING,
    what="rope_scaling names no type or one engines do not know, two different types, a factor that is not a "
    "number above 1, or an original_max_position_embeddings above max_position_embeddings.",
    why="Engines either refuse the config or compute the wrong rotary frequencies: long prompts then decode into noise.",
    fix_by_hand="Restore rope_scaling from the model's original config.json.",
    example='"rope_scaling": {"type": "yarn"} without a factor.',
)

MDL012 = Code(
    "MDL012",
    "rope_theta differs between config.json and the GGUF",
    Severity.WARNING,
    what="The RoPE base in config.json (transformers' default 10000 where it has none) is not the GGUF's "
    "<arch>.rope.freq_base for the same model.",
    why="One of the two was converted with the wrong base: the same prompt decodes differently in vLLM and llama.cpp.",
    fix_by_hand="Reconvert the GGUF from the original checkpoint, or restore rope_theta in config.json.",
    example="config.json says rope_theta 1000000, the GGUF converted from it says rope.freq_base 10000.",
)

MDL013 = Code(
    "MDL013",
    "The sliding window is larger than the model's context",
    Severity.WARNING,
    what="sliding_window exceeds max_position_embeddings while sliding-window attention is on.",
    why="The window can never slide: every layer attends to the whole context, and a KV budget that counts the window is wrong.",
    fix_by_hand="Restore sliding_window (and use_sliding_window) from the model's original config.json.",
    example="sliding_window 131072 in a config whose max_position_embeddings is 32768.",
)

MDL020 = Code(
    "MDL020",
    "The declared precision does not match the stored weights",
    Severity.WARNING,
    what="torch_dtype says float16 while the weights are stored in bfloat16 (or the other way round), or "
    "quantization_config names a method whose tensors the files do not hold (or the files hold quantized "
    "tensors with no quantization_config).",
    why="bfloat16 weights cast to float16 can overflow to inf (8 exponent bits down to 5); a wrong "
    "quantization_config makes loaders read packed integers as weights, or fail.",
    fix_by_hand="Set torch_dtype to the stored type, and restore quantization_config from the checkpoint's original config.json.",
    example='torch_dtype "float16" while the shards store BF16 tensors: cast at load, large activations overflow to inf.',
)

MDL021 = Code(
    "MDL021",
    "The KV-cache type is not one the serving engine has",
    Severity.WARNING,
    what="--kv-dtype asks for a KV cache that the engine this model format is served with does not offer: "
    "llama.cpp (GGUF) has no fp8 cache, vLLM (safetensors) no int8 or int4 cache.",
    why="The budget assumes a cache that cannot be configured; the real one is twice the size or more.",
    fix_by_hand="GGUF: --kv-dtype int8 budgets llama.cpp's q8_0 (-ctk q8_0 -ctv q8_0); safetensors: --kv-dtype fp8 "
    "budgets vLLM's --kv-cache-dtype fp8.",
    example="--kv-dtype fp8 for a GGUF model: llama.cpp has no fp8 KV cache (q8_0 is the nearest).",
)

MDL022 = Code(
    "MDL022",
    "The shards store different dtypes",
    Severity.WARNING,
    what="Some shards hold their weights in one floating-point type and others in another.",
    why="A checkpoint merged from different sources: engines cast silently, and the parts disagree in precision.",
    fix_by_hand="Re-export the checkpoint in one dtype, or download it again from a single source.",
    example="model-00001-of-00002.safetensors stores BF16 and model-00002-of-00002.safetensors F32: a merge went wrong.",
)

MDL030 = Code(
    "MDL030",
    "Generation has no end-of-sequence token the tokenizer knows",
    Severity.ERROR,
    what="generation_config.json (or config.json) names an eos_token_id the tokenizer does not define, or there is no "
    "end-of-sequence token at all.",
    why="Generation then stops only at max_tokens: every request runs to its limit, decode time and cost "
    "multiply, and answers end in garbage.",
    fix_by_hand="Set eos_token_id in generation_config.json to the tokenizer's end-of-sequence (and end-of-turn) token ids.",
    example="generation_config.json says eos_token_id 151645, and tokenizer.json defines ids 0–151642 only: generation never stops.",
)

MDL031 = Code(
    "MDL031",
    "A bos or pad token id the tokenizer does not define",
    Severity.WARNING,
    what="generation_config.json (or config.json) gives a bos_token_id or pad_token_id that is not a token of the tokenizer.",
    why="Prompts start with, or batches are padded with, an id that is no token: engines that prepend it feed the "
    "model a row it never saw, and one past the embedding table fails the request.",
    fix_by_hand="Set bos_token_id and pad_token_id to ids the tokenizer defines (its tokenizer_config.json names the tokens).",
    example="pad_token_id 128256 in config.json for a tokenizer of 128,256 ids (0–128,255).",
)

MDL032 = Code(
    "MDL032",
    "A chat model without a chat template",
    Severity.WARNING,
    what="The model is instruction-tuned (by its name, or because it stops at an end-of-turn token), but neither "
    "tokenizer_config.json nor chat_template.jinja carries a chat template.",
    why='Chat-completion endpoints refuse the request (transformers: "Cannot use chat template functions '
    'because tokenizer.chat_template is not set") or format it in a way the model was not trained on.',
    fix_by_hand="Copy chat_template (or chat_template.jinja) from the original repository, or pass --chat-template to the server.",
    example="An -Instruct model whose tokenizer_config.json has no chat_template and no chat_template.jinja beside it.",
)

MDL033 = Code(
    "MDL033",
    "vocab_size disagrees with the weights or the tokenizer",
    Severity.ERROR,
    what="config.json's vocab_size is not the number of rows of the embedding (or output) matrix, or the tokenizer "
    "defines ids at or beyond vocab_size.",
    why='Loading fails ("size mismatch for model.embed_tokens.weight"), or a token id past the table crashes '
    "the server mid-request (CUDA device-side assert, index out of range).",
    fix_by_hand="Restore the original config.json and tokenizer files; after adding tokens, resize the embeddings and save again.",
    example="vocab_size 152064 in config.json, but the embedding holds 151,936 rows.",
)

MDL034 = Code(
    "MDL034",
    "tokenizer.json does not parse",
    Severity.ERROR,
    what="tokenizer.json is not valid JSON (cut off, edited, or another file saved under its name).",
    why="The fast tokenizer cannot load; servers fail at start.",
    fix_by_hand="Download tokenizer.json again.",
    example="tokenizer.json cut off at 7.2 MB of 11.4 MB: it does not parse as JSON.",
)

MDL035 = Code(
    "MDL035",
    "The tokenizer's end-of-turn token does not stop generation",
    Severity.WARNING,
    what="tokenizer_config.json's eos_token is not among the eos_token_id values of generation_config.json.",
    why="The chat template ends each turn with that token, but generation stops only at the others: answers run on "
    "into a fabricated next turn until max_tokens (the early Llama 3 Instruct release did this).",
    fix_by_hand="Add the token's id to eos_token_id in generation_config.json.",
    example="The tokenizer's eos_token is <|im_end|> (151645), but generation_config.json stops only at 151643 (<|endoftext|>).",
)

MDL040 = Code(
    "MDL040",
    "The model path has spaces or non-ASCII characters",
    Severity.WARNING,
    what="The model's path contains whitespace or characters outside ASCII.",
    why="Shell scripts that do not quote it, some Docker volume specs and older loaders break on such paths.",
    fix_by_hand="Move or link the model to a path of plain ASCII letters, digits, dots, dashes and underscores.",
    example='--model "/data/模型/Qwen2 7B": shell scripts that do not quote the path break on the space.',
)

ARTIFACT_CODES = (
    MDL001,
    MDL002,
    MDL003,
    MDL004,
    MDL005,
    MDL006,
    MDL007,
    MDL010,
    MDL011,
    MDL012,
    MDL013,
    MDL020,
    MDL021,
    MDL022,
    MDL030,
    MDL031,
    MDL032,
    MDL033,
    MDL034,
    MDL035,
    MDL040,
)
# a model with one of these is damaged: its files are the artifacts check's to report, not the budget's
DAMAGING = (MDL001, MDL002, MDL003, MDL004, MDL005, MDL006, MDL007)
REDOWNLOADABLE = (MDL001, MDL002, MDL005, MDL006, MDL007)
