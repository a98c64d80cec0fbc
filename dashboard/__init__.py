"""`ldp dashboard`: pages of window estimates, served locally or exported as files."""
