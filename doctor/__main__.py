from decode_doctor.cli.main import main

main()
