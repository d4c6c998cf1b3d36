"""One run's events: the History (fold, checkpoints, seek), recordings, the Chrome trace."""
