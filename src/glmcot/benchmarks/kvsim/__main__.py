from glmcot.benchmarks.kvsim.command import main

raise SystemExit(main())
