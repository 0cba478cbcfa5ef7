"""Where policy models logged before rltune.tracking import their class from (their code file names it)."""

from rltune.tracking._mlflow_model import PolicyModel  # noqa: F401
