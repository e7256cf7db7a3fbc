"""The browser view: its state document, its server and the replay of a finished run."""
