from detachlint.cli import main

raise SystemExit(main())
