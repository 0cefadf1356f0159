# source: https://github.com/xiaoyufenfei/Efficient-Segmentation-Networks/pull/5
# category: DL301
# expect: flag 45, 49
# evidence: val(args, val_loader, model) wraps only input.cuda()-style transfer in torch.no_grad(); the model call itself runs with grad mode on, so every validation output carries a grad_fn and its graph.
import time
import torch
import torch.nn as nn
import numpy as np
from argparse import Namespace


class ENet(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.initial = nn.Conv2d(3, 8, 3, padding=1)
        self.fullconv = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        return self.fullconv(torch.relu(self.initial(x)))


def get_iou(data_list, class_num):
    conf = np.zeros((class_num, class_num))
    for gt, pred in data_list:
        for g, p in zip(gt, pred):
            conf[g, p] += 1
    inter = np.diag(conf)
    union = conf.sum(0) + conf.sum(1) - inter
    per_class_iu = inter / np.maximum(union, 1)
    return per_class_iu.mean(), per_class_iu


def val(args, val_loader, model):
    """
    args:
      val_loader: loaded for validation dataset
      model: model
    return: mean IoU and IoU class
    """
    # evaluation mode
    model.eval()
    total_batches = len(val_loader)

    data_list = []
    for i, (input, label, size, name) in enumerate(val_loader):
        with torch.no_grad():
            input_var = input.to(args.device)
        start_time = time.time()
        output = model(input_var)
        time_taken = time.time() - start_time
        print("[%d/%d]  time: %.2f" % (i + 1, total_batches, time_taken))
        output = output.cpu().data[0].numpy()
        gt = np.asarray(label[0].numpy(), dtype=np.uint8)
        output = output.transpose(1, 2, 0)
        output = np.asarray(np.argmax(output, axis=2), dtype=np.uint8)
        data_list.append([gt.flatten(), output.flatten()])

    meanIoU, per_class_iu = get_iou(data_list, args.classes)
    return meanIoU, per_class_iu


if __name__ == "__main__":
    torch.manual_seed(0)
    args = Namespace(classes=3, device="cpu", seen_graphs=[])
    model = ENet(args.classes)
    model.register_forward_hook(lambda m, inp, out: args.seen_graphs.append(out.grad_fn))
    val_loader = [
        (torch.randn(1, 3, 12, 12), torch.randint(0, 3, (1, 12, 12)), (12, 12), "img%d" % k)
        for k in range(3)
    ]
    mIOU_val, per_class_iu = val(args, val_loader, model)

    assert len(args.seen_graphs) == 3
    assert all(g is not None for g in args.seen_graphs), "no_grad around the transfer did not cover model(input_var)"
    assert all(p.grad is None for p in model.parameters())
    print("evidence holds: all", len(args.seen_graphs), "validation outputs carry a grad_fn; mIoU %.3f" % mIOU_val)
