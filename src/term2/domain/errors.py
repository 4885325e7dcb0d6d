"""Errors the use cases raise; adapters map them to their own vocabulary."""


class Term2Error(Exception):
    """Base for errors with a message meant for the user."""


class InvalidInput(Term2Error):
    """The request is well-formed but its values are unacceptable."""


class NotFound(Term2Error):
    """A named thing (session, file) does not exist."""


class Busy(Term2Error):
    """A session already has a foreground prompt."""


class StoreUnavailable(Term2Error):
    """The session store cannot be opened or written."""


class NotAuthenticated(Term2Error):
    """The model needs a key that is not set (or no model could be picked for want of one); says which."""


class ModelNotConfigured(Term2Error):
    """No model was chosen by flag, environment or config file."""
