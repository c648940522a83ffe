from tau_controller.cli import main

main()
