from trocket.cli import main

raise SystemExit(main())
