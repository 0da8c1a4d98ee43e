"""``python -m naru_eval.cli``: the ``naru-eval`` console script."""

from naru_eval.cli.main import main

raise SystemExit(main())
