"""`python -m glmcot.benchmarks.codesign`: the co-design benchmark's command line."""

from glmcot.benchmarks.codesign.command import main

raise SystemExit(main())
