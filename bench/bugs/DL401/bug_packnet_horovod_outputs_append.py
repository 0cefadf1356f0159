# source: https://github.com/TRI-ML/packnet-sfm/issues/47
# category: DL401
# expect: flag 60
# evidence: HorovodTrainer.train appends each step's output dict whose 'loss' still has a grad_fn, so every step's graph node chain stays referenced by `outputs` until the epoch ends.
import torch
import torch.nn as nn


class AvgMeter:
    def __init__(self, n_max=50):
        self.n_max, self.values = n_max, []

    def __call__(self, value):
        self.values = (self.values + [value])[-self.n_max:]
        return sum(self.values) / len(self.values)


def sample_to_cuda(data):
    return {k: v.to("cpu") for k, v in data.items()}


class SelfSupModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.depth_net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
        self.current_epoch = 0

    def training_step(self, batch, *args):
        depth = self.depth_net(batch["rgb"])
        loss = (depth - batch["depth"]).abs().mean()
        return {"loss": loss, "metrics": {"depth_mean": depth.mean().item()}}

    def training_epoch_end(self, output_batch):
        avg = sum(o["loss"] for o in output_batch) / len(output_batch)
        return {"avg_train-loss": avg}


class HorovodTrainer:
    def __init__(self, **kwargs):
        self.avg_loss = AvgMeter(50)
        self.is_rank_0 = True
        self.seen_outputs = None

    def train(self, dataloader, module, optimizer):
        # Set module to train
        module.train()
        # Start training loop
        outputs = []
        # For all batches
        for i, batch in enumerate(dataloader):
            # Reset optimizer
            optimizer.zero_grad()
            # Send samples to GPU and take a training step
            batch = sample_to_cuda(batch)
            output = module.training_step(batch, i)
            # Backprop through loss and take an optimizer step
            output['loss'].backward()
            optimizer.step()
            # Append output to list of outputs
            outputs.append(output)
            # Update progress bar if in rank 0
            if self.is_rank_0:
                self.avg_loss(output['loss'].item())
        self.seen_outputs = outputs
        # Return outputs for epoch end
        return module.training_epoch_end(outputs)


if __name__ == "__main__":
    torch.manual_seed(0)
    module = SelfSupModel()
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
    dataloader = [{"rgb": torch.randn(4, 6), "depth": torch.rand(4, 1)} for _ in range(5)]
    trainer = HorovodTrainer()
    epoch_out = trainer.train(dataloader, module, optimizer)

    kept = [o["loss"].grad_fn for o in trainer.seen_outputs]
    assert len(kept) == 5 and all(g is not None for g in kept), "each stored loss keeps its graph"
    assert epoch_out["avg_train-loss"].grad_fn is not None, "epoch average is itself a graph over all steps"
    print("evidence holds: outputs list holds", len(kept), "losses with grad_fn after the epoch")
