from decode_doctor.cli import main

main()
