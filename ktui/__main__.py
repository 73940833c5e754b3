from ktui.cli import main

main()
