"""No private name of torch, Optuna or MLflow outside their adapters, attribute-style uses included.

The per-library tests (tests/trainers/test_torch_compat.py, tests/orchestrator/test_optuna_compat.py,
tests/tracking/test_mlflow_compat.py) grep for the private names rltune spells; this one reads the code
with ``ast`` (tests/private_attributes.py) and follows what comes from each library.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from private_attributes import ADAPTERS, private_attribute_uses, scan_source

import rltune

ROOT = Path(rltune.__file__).resolve().parent.parent


def test_no_private_attribute_of_torch_optuna_or_mlflow_outside_their_adapters():
    hits = private_attribute_uses(ROOT)
    assert not hits, "private names of a library outside its adapter (" + ", ".join(ADAPTERS.values()) + "):\n" + \
        "\n".join(hits)


def test_the_adapters_are_what_the_scan_catches():
    for library in ("torch", "mlflow"):  # Optuna's adapter takes untyped trials: its regex test covers it
        found = scan_source((ROOT / ADAPTERS[library]).read_text())
        assert any(lib == library for _, lib, _ in found), ADAPTERS[library]


CAUGHT = {
    "a private attribute of a study": "import optuna\nstudy = optuna.load_study(study_name='s', storage='x')\n"
                                      "study._storage\n",
    "of what a loop over a library value yields": "import optuna\ndef f(study: optuna.Study):\n"
                                                  "    for t in study.trials:\n        t._cached_frozen_trial\n",
    "in a comprehension": "import optuna\ndef f(study: 'optuna.Study'):\n"
                          "    return [t._trial_id for t in study.get_trials()]\n",
    "of a parameter annotated with a library type": "from optuna.trial import FrozenTrial\n"
                                                    "def f(trial: FrozenTrial):\n    return trial._trial_id\n",
    "by getattr": "import optuna\ndef f(study: optuna.Study):\n    return getattr(study, '_storage')\n",
    "of a library module": "import mlflow.pyfunc\nmlflow.pyfunc._load_pyfunc\n",
    "of torch": "import torch\ntorch._dynamo.reset()\n",
    "a private module imported": "from torch._dynamo import lookup_backend\n",
    "of a class imported by name": "from torch import nn\nnn.Module._apply\n",
    "kept on self": "import optuna\nclass A:\n    def __init__(self):\n        self.study = optuna.create_study()\n"
                    "    def f(self):\n        return self.study._storage\n",
    "a private class attribute of a library base": "import mlflow.pyfunc\n"
                                                   "class M(mlflow.pyfunc.PythonModel):\n"
                                                   "    _skip_type_hint_validation = True\n",
    "an inherited private attribute": "import torch\nclass N(torch.nn.Module):\n"
                                      "    def f(self):\n        return self._modules\n",
    "an overridden private method": "from torch import nn\nclass N(nn.Module):\n"
                                    "    def _apply(self, fn):\n        return super()._apply(fn)\n",
}


@pytest.mark.parametrize("case", sorted(CAUGHT))
def test_the_scan_catches(case):
    assert scan_source(CAUGHT[case]), case


NOT_CAUGHT = {
    "rltune's own private attributes": "import torch\nclass Net(torch.nn.Module):\n"
                                       "    def __init__(self):\n        super().__init__()\n"
                                       "        self._hidden = 3\n        self._head = torch.nn.Linear(2, 2)\n"
                                       "    def f(self):\n        return self._hidden, self._head.weight\n",
    "rltune's own private modules": "from rltune.trainers import _config\n_config._x\nimport torch\n",
    "a public torch value on a private attribute": "import torch\nclass A:\n    def __init__(self):\n"
                                                   "        self._t = torch.zeros(1)\n"
                                                   "    def f(self):\n        return self._t.shape\n",
    "a name bound to torch and to something else": "import torch\ndef f(flag, own):\n"
                                                   "    x = torch.zeros(1) if flag else own\n    x = own\n"
                                                   "    return x._y\n",
    "dunders": "import torch\ntorch.__version__\ntorch.nn.Module.__name__\n",
}


@pytest.mark.parametrize("case", sorted(NOT_CAUGHT))
def test_the_scan_leaves_alone(case):
    assert scan_source(NOT_CAUGHT[case]) == [], case
