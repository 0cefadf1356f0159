# source: https://github.com/TorchSim/torch-sim/issues/469
# category: DL402
# expect: flag 96
# evidence: during a relaxation the state's positions require grad, and FairChemModel.forward calls state.positions[...].cpu().numpy(), which raises "Can't call numpy() on Tensor that requires grad".
from dataclasses import dataclass

import numpy as np
import torch

torch.manual_seed(0)


@dataclass
class SimState:
    positions: torch.Tensor
    masses: torch.Tensor
    cell: torch.Tensor
    pbc: bool
    atomic_numbers: torch.Tensor
    system_idx: torch.Tensor = None

    @property
    def device(self):
        return self.positions.device

    @property
    def row_vector_cell(self):
        return self.cell.mT


class Atoms:
    """Minimal stand-in for ase.Atoms (holds numpy arrays)."""

    def __init__(self, numbers, positions, cell=None, pbc=False):
        self.numbers = np.asarray(numbers)
        self.positions = np.asarray(positions)
        self.cell = cell
        self.pbc = pbc


class AtomicData:
    """Minimal stand-in for fairchem.core.datasets.atomic_data.AtomicData."""

    def __init__(self, pos, atomic_numbers):
        self.pos, self.atomic_numbers = pos, atomic_numbers

    @classmethod
    def from_ase(cls, atoms, task_name=None):
        return cls(torch.from_numpy(atoms.positions).float(), torch.from_numpy(atoms.numbers))


def atomicdata_list_to_batch(atomic_data_list):
    return atomic_data_list


class PredictUnit:
    """Stand-in for the fairchem predictor: a pairwise harmonic potential."""

    def predict(self, batch):
        energies, forces = [], []
        for data in batch:
            pos = data.pos.clone().requires_grad_(True)
            d = torch.cdist(pos, pos) + torch.eye(len(pos))
            e = ((d - 1.5) ** 2).triu(1).sum()
            (g,) = torch.autograd.grad(e, pos)
            energies.append(e.detach())
            forces.append(-g)
        return {"energy": torch.stack(energies), "forces": torch.cat(forces)}


class FairChemModel:
    def __init__(self, model=None, cpu=True, dtype=torch.float32, compute_stress=False, task_name=None):
        self._dtype = dtype
        self._compute_stress = compute_stress
        self._device = torch.device("cpu")
        self.task_name = task_name
        self.predictor = PredictUnit()

    def __call__(self, state):
        return self.forward(state)

    def forward(self, state: SimState) -> dict:
        if state.device != self._device:
            state = state.to(self._device)

        if state.system_idx is None:
            state.system_idx = torch.zeros(state.positions.shape[0], dtype=torch.int)

        natoms = torch.bincount(state.system_idx)
        atomic_data_list = []

        for i, (n, c) in enumerate(
            zip(natoms, torch.cumsum(natoms, dim=0), strict=False)
        ):
            # Extract system data
            positions = state.positions[c - n : c].cpu().numpy()
            atomic_numbers = state.atomic_numbers[c - n : c].cpu().numpy()
            cell = (
                state.row_vector_cell[i].cpu().numpy()
                if state.row_vector_cell is not None
                else None
            )

            # Create ASE Atoms object first
            atoms = Atoms(
                numbers=atomic_numbers,
                positions=positions,
                cell=cell,
                pbc=state.pbc if cell is not None else False,
            )
            atomic_data = AtomicData.from_ase(atoms)
            atomic_data_list.append(atomic_data)

        batch = atomicdata_list_to_batch(atomic_data_list)
        predictions = self.predictor.predict(batch)

        results = {}
        results["energy"] = predictions["energy"].to(dtype=self._dtype)
        results["forces"] = predictions["forces"].to(dtype=self._dtype)
        return results


def gradient_descent_relax(state, model, steps=3, lr=0.01):
    """Optimizer flow in which positions are tracked by autograd (as in the relax/optimize path)."""
    state.positions = state.positions.detach().requires_grad_(True)
    for _ in range(steps):
        results = model(state)
        with torch.no_grad():
            state.positions += lr * results["forces"]
    return state


if __name__ == "__main__":
    state = SimState(
        positions=torch.rand(4, 3) * 3,
        masses=torch.ones(4),
        cell=torch.eye(3).unsqueeze(0) * 5.0,
        pbc=True,
        atomic_numbers=torch.tensor([14, 14, 14, 14]),
    )
    model = FairChemModel(model="uma-s-1", cpu=True)
    print("static energy:", model(state)["energy"].item())
    try:
        gradient_descent_relax(state, model)
        raise AssertionError("relaxation unexpectedly succeeded")
    except RuntimeError as e:
        msg = str(e)
    assert "numpy()" in msg and "requires grad" in msg, msg
    print("evidence holds: relax failed with:", msg)
