"""`MLPModel`: a neural cost model over per-store features, after TVM's segment-sum MLP
(`cost_model/mlp_model.py`): each row (written buffer) is encoded by an MLP, a candidate's
encodings are summed, and a residual head turns the sum into its score. It learns to rank the
candidates of one workload (a LambdaRank loss on the labels normalized per workload), warm-starts
from its weights when a search updates it, and `pretrain` learns from a database's records.
Needs PyTorch (the `mlp` extra), imported only when a model is made. See docs/architecture.md,
"Features and cost model".
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from msdb.errors import MsdbError
from msdb.tuner.cost_model.learning import LearningCostModel, MeasuredGroups, WorkloadKeys
from msdb.model_file import CostModelFileError, ModelStamp, read_model_file, write_model_file
from msdb.tuner.cost_model.training_data import WorkloadSamples
from msdb.tuner.features.base import FeatureExtractor

if TYPE_CHECKING:
    import torch

    from msdb.tuner.candidate import MeasureCandidate
    from msdb.tuner.context import TuneContext

__all__ = ["MLPConfig", "MLPModel", "TorchMissing"]

logger = logging.getLogger(__name__)

_FORMAT = "msdb-mlp-model-1"


class TorchMissing(MsdbError):
    """The 'mlp' cost model was asked for without PyTorch installed."""


@dataclass(frozen=True)
class MLPConfig:
    """The network and its training: TVM's values except `hidden_dim` (256 there: 128 keeps a
    one-core search's model time near XGBoost's), `learning_rate` (7e-4 there: its 50 epochs
    are 50 steps on a workload's first rounds) and the step caps, which bound what one training
    may cost whatever the data size (a step is one batch of one workload)."""

    hidden_dim: int = 128
    learning_rate: float = 3e-3
    weight_decay: float = 1e-6
    grad_clip_norm: float = 0.5
    batch_size: int = 128
    train_epochs: int = 50  # a training from new data (first training, pretraining)
    update_epochs: int = 5  # a warm-started training after a search's round
    max_train_steps: int = 2000
    max_update_steps: int = 100


class MLPModel(LearningCostModel):
    """The segment-sum MLP (see the module docstring). `seed` fixes the initial weights, the
    batches and the warm-up noise; `num_threads` is torch's thread count while it trains or
    predicts (restored afterwards). Same seed, data and thread count: the same scores."""

    def __init__(self, *, extractor: FeatureExtractor | str = "per-store-feature", config: MLPConfig = MLPConfig(),
                 seed: int = 0, num_threads: int = 1, num_warmup_samples: int = 100) -> None:
        _torch()  # fail here, at creation, without PyTorch
        self.extractor = FeatureExtractor.create(extractor) if isinstance(extractor, str) else extractor
        self.config = config
        self.seed = seed
        self.num_threads = num_threads
        self.num_warmup_samples = num_warmup_samples
        self.measured = MeasuredGroups()
        self.net: torch.nn.ModuleDict | None = None
        self.scale: np.ndarray | None = None  # per-column divisor, fixed at the first training
        self.rng = np.random.default_rng(seed)
        self.generator = _torch().Generator().manual_seed(seed)  # batches
        self.target_kind: str | None = None  # of the measurements learned (the stamp's)
        self._keys = WorkloadKeys()

    # ---- the CostModel interface (`update` is LearningCostModel's) -----------------------
    def _learn_round(self, key: str, features: list[np.ndarray], costs: list[float]) -> None:
        if self.measured.add(key, features, costs) and self.measured.size >= self.num_warmup_samples:
            # below the warm-up its scores are noise whatever it learned: the first training waits
            if self.net is None:
                self._train(self.config.train_epochs, self.config.max_train_steps)
            else:
                self._train(self.config.update_epochs, self.config.max_update_steps)

    def can_rank(self) -> bool:
        return self.net is not None and self.measured.size >= self.num_warmup_samples

    def predict(self, context: TuneContext, candidates: Sequence[MeasureCandidate]) -> np.ndarray:
        if not self.can_rank():
            return self.rng.uniform(0.0, 1.0, len(candidates))
        return self._predict(self._features(context, candidates))

    def save(self, path: str) -> None:
        """One .npz model file (`msdb.model_file.write_model_file`, no pickles): the weights as arrays
        (`net.<name>`), the feature scale, what it learned from (for later updates), the
        generators' states, the config and the stamp a loader checks."""
        meta = {
            "format": _FORMAT, "stamp": self.stamp().to_json(), "config": asdict(self.config),
            "data_size": self.measured.size, "rng": self.rng.bit_generator.state,
            "weights": sorted(self.net.state_dict()) if self.net is not None else None,
        }
        arrays = self.measured.arrays()
        arrays["generator"] = self.generator.get_state().numpy()
        arrays["scale"] = self.scale if self.scale is not None else np.zeros(0, np.float32)
        if self.net is not None:
            for name, value in self.net.state_dict().items():
                arrays[f"net.{name}"] = value.detach().cpu().numpy()
        write_model_file(path, meta, arrays)
        logger.info("saved MLPModel (%d measured candidates) to %s", self.measured.size, path)

    def load(self, path: str) -> None:
        """Replace the state by a saved model's; `CostModelFileError` (naming `path`) for a
        file that is not an MLP model, is damaged, or whose features are not this model's
        extractor's."""
        torch = _torch()
        meta, saved = read_model_file(path, _FORMAT)
        stamp = ModelStamp.from_json(meta.get("stamp"), path)
        stamp.check(path, self.extractor, None)
        try:
            config = MLPConfig(**{f.name: meta["config"][f.name] for f in fields(MLPConfig)})
            data = MeasuredGroups.from_arrays(saved)
            if data.size != int(meta["data_size"]):
                raise ValueError(f"{data.size} stored candidates, the file says {meta['data_size']}")
            generator = torch.Generator()
            generator.set_state(torch.from_numpy(saved["generator"].astype(np.uint8)))
            net = scale = None
            if meta["weights"] is not None:
                scale = saved["scale"].astype(np.float32)
                net = _network(config, len(scale))
                state = {name: torch.from_numpy(saved[f"net.{name}"].copy()) for name in meta["weights"]}
                net.load_state_dict(state, strict=True)
                net.eval()
            rng = np.random.default_rng()
            rng.bit_generator.state = meta["rng"]
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise CostModelFileError(f"{path}: a damaged MLP model file ({type(exc).__name__}: {exc})") from None
        self.config, self.measured, self.net, self.scale = config, data, net, scale
        self.generator, self.rng = generator, rng
        self.target_kind = stamp.target_kind

    # ---- beyond TVM: learning from a database ----------------------------------------------
    def learn(self, samples: Sequence[WorkloadSamples]) -> int:
        """Add replayed workloads' candidates and costs, then train `train_epochs` (warm-started
        when the model has weights); returns how many were added."""
        added = self._add_samples(samples)
        if added:
            self._train(self.config.train_epochs, self.config.max_train_steps)
        logger.info("trained on %d records of %d workloads", added, len(samples))
        return added

    # ---- internals -------------------------------------------------------------------------
    @contextmanager
    def _threads(self) -> Iterator[None]:
        """torch's intra-op threads set to `num_threads` for the block, the process's restored."""
        torch = _torch()
        before = torch.get_num_threads()
        torch.set_num_threads(self.num_threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def _train(self, epochs: int, max_steps: int) -> None:
        """Adam over batches of one workload each (the loss ranks within a workload), `epochs`
        passes over every workload's candidates in a seeded order, at most `max_steps` steps,
        from the current weights (new ones, seeded, the first time)."""
        torch = _torch()
        groups = [g for g in self.measured.groups.values() if len(g.costs) >= 2]  # a ranking needs a pair
        if not groups:
            return
        config = self.config
        with self._threads():
            if self.net is None or self.scale is None:
                rows = np.concatenate([f for g in groups for f in g.features], axis=0)
                self.scale = np.maximum(np.abs(rows).max(axis=0), 1.0).astype(np.float32)
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(self.seed)
                    self.net = _network(config, rows.shape[1])
            net = self.net
            packed = [_Pack(g.features, self.scale, g.labels()) for g in groups]
            optimizer = _Adam(list(net.parameters()), config.learning_rate, config.weight_decay)
            net.train()
            steps, loss_sum = 0, 0.0
            for _ in range(epochs):
                if steps >= max_steps:
                    break
                batches = [(i, idx) for i, pack in enumerate(packed)
                           for idx in pack.batches(config.batch_size, self.generator)]
                for b in torch.randperm(len(batches), generator=self.generator).tolist():
                    if steps >= max_steps:
                        break
                    i, idx = batches[b]
                    x, segments, count, y = packed[i].take(idx)
                    assert y is not None
                    loss = lambda_rank_loss(_scores(net, x, segments, count), y)
                    net.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(net.parameters(), config.grad_clip_norm)
                    optimizer.step()
                    steps += 1
                    loss_sum += float(loss.detach())
            net.eval()
        logger.debug("MLP trained on %d candidates of %d workloads: %d steps, mean loss %.6f", self.measured.size,
                     len(groups), steps, loss_sum / max(steps, 1))

    def _predict(self, xs: Sequence[np.ndarray]) -> np.ndarray:
        torch = _torch()
        assert self.net is not None and self.scale is not None
        pack = _Pack([np.asarray(x, dtype=np.float32) for x in xs], self.scale)
        with self._threads(), torch.no_grad():
            x, segments, count, _ = pack.take(None)
            return _scores(self.net, x, segments, count).numpy().astype(np.float64)


class _Pack:
    """Candidates' rows scaled and stacked into one tensor, with each candidate's row range and
    label (TVM's `SegmentDataLoader`, the scale fixed by the model instead of each batch's)."""

    def __init__(self, features: Sequence[np.ndarray], scale: np.ndarray, labels: np.ndarray | None = None) -> None:
        torch = _torch()
        self.counts = np.array([f.shape[0] for f in features], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)
        rows = np.concatenate(features, axis=0) if features else np.zeros((0, len(scale)), np.float32)
        self.rows = torch.from_numpy(np.ascontiguousarray(rows / scale, dtype=np.float32))
        self.labels = None if labels is None else torch.from_numpy(np.asarray(labels, dtype=np.float32))

    def __len__(self) -> int:
        return len(self.counts)

    def batches(self, size: int, generator: torch.Generator) -> list[torch.Tensor | None]:
        """An epoch's batches: the whole workload (None), or a seeded permutation cut in
        chunks of `size`."""
        n = len(self)
        if n <= size:
            return [None]
        order = _torch().randperm(n, generator=generator)
        return [order[start:start + size] for start in range(0, n, size)]

    def take(self, idx: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, int, torch.Tensor | None]:
        """The rows, each row's position in the batch, the batch size and the labels of the
        candidates `idx` (all of them for None)."""
        torch = _torch()
        if idx is None:
            chosen = np.arange(len(self))
            rows = self.rows
        else:
            chosen = idx.numpy()
            ranges = [np.arange(self.starts[c], self.starts[c + 1]) for c in chosen]
            rows = self.rows[torch.from_numpy(np.concatenate(ranges))]
        segments = torch.from_numpy(np.repeat(np.arange(len(chosen)), self.counts[chosen]))
        labels = None if self.labels is None else self.labels[torch.from_numpy(chosen)]
        return rows, segments, len(chosen), labels


class _Adam:
    """Adam with L2 weight decay, the update of `torch.optim.Adam` (TVM's optimizer), written out
    because the first use of any `torch.optim` optimizer imports TorchDynamo: seconds of a
    tuning run for nothing."""

    def __init__(self, params: list[torch.nn.Parameter], lr: float, weight_decay: float,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        torch = _torch()
        self.params, self.lr, self.weight_decay, self.betas, self.eps = params, lr, weight_decay, betas, eps
        self.moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
        self.t = 0

    def step(self) -> None:
        torch = _torch()
        self.t += 1
        beta1, beta2 = self.betas
        step = self.lr / (1 - beta1 ** self.t)
        correction2 = 1 - beta2 ** self.t
        with torch.no_grad():
            for p, (m, v) in zip(self.params, self.moments):
                if p.grad is None:
                    continue
                grad = p.grad + self.weight_decay * p
                m.mul_(beta1).add_(grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                p.addcdiv_(m, (v / correction2).sqrt_().add_(self.eps), value=-step)


def _torch() -> Any:
    """The torch module; `TorchMissing` when it is not installed."""
    try:
        import torch
    except ImportError:
        raise TorchMissing("the 'mlp' cost model needs PyTorch: pip install -e '.[mlp]' in the msdb checkout") from None
    return torch


def _network(config: MLPConfig, width: int) -> torch.nn.ModuleDict:
    """TVM's segment-sum MLP: a two-layer row encoder, two residual layers on the summed
    encodings, a linear decoder to one score (float32, CPU)."""
    nn = _torch().nn
    hidden = config.hidden_dim
    return nn.ModuleDict({
        "encoder": nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU()),
        "layer0": nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU()),
        "layer1": nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU()),
        "decoder": nn.Linear(hidden, 1),
    })


def _scores(net: torch.nn.ModuleDict, rows: torch.Tensor, segments: torch.Tensor, count: int) -> torch.Tensor:
    """Each candidate's score: its rows encoded and summed, then the residual head."""
    torch = _torch()
    encoded = net["encoder"](rows)
    summed = torch.zeros((count, encoded.shape[1]), dtype=encoded.dtype).index_add_(0, segments, encoded)
    out = summed + net["layer0"](summed)
    out = out + net["layer1"](out)
    return net["decoder"](out).squeeze(-1)


def lambda_rank_loss(scores: torch.Tensor, labels: torch.Tensor, sigma: float = 1.0) -> torch.Tensor:
    """The ranking loss over one workload's candidates, on each pair whose labels differ: the
    logistic loss of scoring the worse one higher (RankNet), averaged twice and summed: once
    weighted by how much swapping the two in the current predicted order would change the NDCG
    (gain `2^label - 1`: LambdaRank, TVM's loss, so the top of the ranking, where the search
    picks, counts most), and once unweighted (so the rest of the order is learned too, which the
    NDCG weights barely ask for when a workload has few candidates)."""
    torch = _torch()
    n = scores.shape[0]
    order = torch.argsort(scores.detach(), descending=True, stable=True)
    position = torch.empty(n, dtype=torch.long)
    position[order] = torch.arange(n)
    discount = 1.0 / torch.log2(position.to(scores.dtype) + 2.0)
    gain = torch.pow(2.0, labels) - 1.0
    ideal = (torch.sort(gain, descending=True).values / torch.log2(torch.arange(n, dtype=scores.dtype) + 2.0)).sum()
    better = (labels[:, None] > labels[None, :]).to(scores.dtype)
    weight = better * (gain[:, None] - gain[None, :]).abs() * (discount[:, None] - discount[None, :]).abs()
    weight = weight / ideal.clamp(min=1e-10)
    pair_loss = torch.nn.functional.softplus(-sigma * (scores[:, None] - scores[None, :]))
    lambda_rank = (weight * pair_loss).sum() / weight.sum().clamp(min=1e-10)
    rank_net = (better * pair_loss).sum() / better.sum().clamp(min=1.0)
    return lambda_rank + rank_net
