from slm.cli import main

main()
