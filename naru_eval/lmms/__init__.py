"""lmms-eval bridge: task hooks, open-task (judge) hooks, the lmms-eval runner; the one layer (with model_adapters) that imports lmms_eval."""
