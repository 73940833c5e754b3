"""The dashboard's screens: main, help, probe dialog, event detail, path dialog."""
