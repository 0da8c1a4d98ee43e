"""CLI: the one ``naru-eval`` parser (naru_eval.cli.main) and one thin module per command group; may import every layer."""

from naru_eval.cli.main import main

__all__ = ["main"]
