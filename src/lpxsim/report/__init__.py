"""Reports: the one-file HTML report, PNG charts, the tour, and the headless-browser check."""
