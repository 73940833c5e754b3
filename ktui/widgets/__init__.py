"""The dashboard's panes: probe table, event pane, stats pane, status line."""
