"""Report: leaderboard, statistics, paper figures, diagnostics, plots and tables, all from sample logs; may import core, store, judge."""
