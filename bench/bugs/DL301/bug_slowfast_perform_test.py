# source: https://github.com/facebookresearch/SlowFast/issues/109
# category: DL301
# expect: flag 73, 77
# evidence: perform_test() puts the model in eval mode and runs every multi-view test clip with grad enabled: each prediction carries a grad_fn and autograd saves the activations of every clip (the reporter's GPU memory dropped sharply once no_grad was added)
import torch
import torch.nn as nn


class TestMeter(object):
    """Ensemble the predictions of the views (spatial crops x temporal clips) of every video."""

    def __init__(self, num_videos, num_clips, num_cls, ensemble_method="sum"):
        self.num_clips = num_clips
        self.ensemble_method = ensemble_method
        self.video_preds = torch.zeros((num_videos, num_cls))
        self.video_labels = torch.zeros((num_videos,)).long()
        self.clip_count = torch.zeros((num_videos,)).long()

    def iter_tic(self):
        pass

    def iter_toc(self):
        pass

    def data_toc(self):
        pass

    def update_stats(self, preds, labels, clip_ids):
        for ind in range(preds.shape[0]):
            vid_id = int(clip_ids[ind]) // self.num_clips
            self.video_labels[vid_id] = labels[ind]
            if self.ensemble_method == "sum":
                self.video_preds[vid_id] += preds[ind]
            elif self.ensemble_method == "max":
                self.video_preds[vid_id] = torch.max(self.video_preds[vid_id], preds[ind])
            self.clip_count[vid_id] += 1

    def log_iter_stats(self, cur_iter):
        pass

    def finalize_metrics(self, ks=(1, 5)):
        top1 = (self.video_preds.argmax(1) == self.video_labels).float().mean().item()
        return {"top1_acc": 100.0 * top1}


class SlowFast(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.slow = nn.Conv3d(3, 8, (1, 3, 3), padding=(0, 1, 1))
        self.fast = nn.Conv3d(3, 4, (3, 3, 3), padding=1)
        self.head = nn.Linear(12, num_classes)

    def forward(self, inputs):
        slow, fast = inputs
        s = self.slow(slow).mean(dim=(2, 3, 4))
        f = self.fast(fast).mean(dim=(2, 3, 4))
        return torch.softmax(self.head(torch.cat([s, f], 1)), dim=1)


def perform_test(test_loader, model, test_meter, cfg, writer=None):
    """
    For classification:
    Perform mutli-view testing that uniformly samples N clips from a video along
    its temporal axis. For each clip, it takes 3 crops to cover the spatial
    dimension, followed by averaging the softmax scores across all Nx3 views to
    form a video-level prediction. All video predictions are compared to
    ground-truth labels and the final testing performance is logged.
    """
    # Enable eval mode.
    model.eval()
    test_meter.iter_tic()

    for cur_iter, (inputs, labels, video_idx, meta) in enumerate(test_loader):
        test_meter.data_toc()

        # Perform the forward pass.
        preds = model(inputs)

        test_meter.iter_toc()
        # Update and log stats.
        test_meter.update_stats(preds.detach(), labels.detach(), video_idx.detach())
        test_meter.log_iter_stats(cur_iter)

        test_meter.iter_tic()

    return test_meter.finalize_metrics()


if __name__ == "__main__":
    torch.manual_seed(0)
    num_videos, num_clips = 2, 3
    test_loader = []
    for b in range(3):
        clip_ids = torch.tensor([2 * b, 2 * b + 1])
        inputs = [torch.randn(2, 3, 2, 8, 8), torch.randn(2, 3, 4, 8, 8)]
        test_loader.append((inputs, torch.tensor([1, 3])[clip_ids // num_clips], clip_ids, {}))
    model = SlowFast()
    test_meter = TestMeter(num_videos, num_clips, 5)
    preds = []
    model.register_forward_hook(lambda mod, inp, out: preds.append(out))
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        metrics = perform_test(test_loader, model, test_meter, cfg=None)
    assert len(preds) == 3 and all(p.grad_fn is not None for p in preds)
    assert sum(saved) > 0 and not test_meter.video_preds.requires_grad
    print("evidence holds: %d test-clip predictions carry grad_fns; autograd saved %d bytes for backward (top1 %.1f)"
          % (len(preds), sum(saved), metrics["top1_acc"]))
