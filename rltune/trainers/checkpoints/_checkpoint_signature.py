"""Optional checkpoint signatures: HMAC-SHA256 with a team's key, to detect checkpoints edited without it.

With ``$RLTUNE_CHECKPOINT_KEY`` set when a checkpoint is written, its
metadata gets a ``signature`` field: HMAC-SHA256, keyed with that key, of
the metadata's canonical JSON. The metadata holds the sha256 of every
other file of the checkpoint, so the signature covers them all. With the
key set when a checkpoint is read, a checkpoint without a signature, or
whose signature does not verify, is a :class:`CheckpointError`; with no key
set, signatures are not checked (a signed checkpoint opens like any other).

The key is read from the environment when needed and never printed,
logged or written anywhere; errors name the variable, never its value.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import Any

from rltune.errors import CheckpointError

KEY_ENV = "RLTUNE_CHECKPOINT_KEY"
SIGNATURE = "signature"  # metadata field: {"algorithm": "hmac-sha256", "hmac": hex digest}
ALGORITHM = "hmac-sha256"


def _key() -> bytes | None:
    key = os.environ.get(KEY_ENV)
    return key.encode() if key else None


def _digest(key: bytes, metadata: dict[str, Any]) -> str:
    from rltune.trainers.checkpoints._checkpoint import METADATA_CHECKSUM  # computed after signing, so not signed

    signed = {k: v for k, v in metadata.items() if k not in (SIGNATURE, METADATA_CHECKSUM)}
    return hmac.new(key, json.dumps(signed, sort_keys=True).encode(), hashlib.sha256).hexdigest()


def sign(metadata: dict[str, Any]) -> None:
    """Add the ``signature`` field to ``metadata`` (as JSON reads it back) when ``$RLTUNE_CHECKPOINT_KEY`` is set."""
    key = _key()
    if key is not None:
        metadata[SIGNATURE] = {"algorithm": ALGORITHM, "hmac": _digest(key, metadata)}


def verify(path: str | os.PathLike[str], metadata: dict[str, Any]) -> None:
    """With ``$RLTUNE_CHECKPOINT_KEY`` set, refuse a checkpoint whose metadata is not signed with that key."""
    key = _key()
    if key is None:
        return
    signature = metadata.get(SIGNATURE)
    if signature is None:
        raise CheckpointError(
            f"checkpoint {str(path)!r} is not signed; {KEY_ENV} is set, so only checkpoints signed with that key "
            f"are opened (unset {KEY_ENV} to open an unsigned checkpoint whose source you trust)"
        )
    if not (isinstance(signature, dict) and signature.get("algorithm") == ALGORITHM
            and isinstance(signature.get("hmac"), str)):
        raise CheckpointError(f"checkpoint {str(path)!r}: metadata field {SIGNATURE!r} is not an {ALGORITHM} signature")
    if not hmac.compare_digest(signature["hmac"].encode(), _digest(key, metadata).encode()):
        raise CheckpointError(
            f"checkpoint {str(path)!r}: its signature does not verify with {KEY_ENV}: it was signed with another key "
            "or edited by someone without the key"
        )
