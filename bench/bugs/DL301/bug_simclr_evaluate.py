# source: https://github.com/AidenDurrant/SimCLR-Pytorch/pull/7
# category: DL301
# expect: flag 55, 63, 65
# evidence: evaluate() runs encoder and mlp with autograd on and never backpropagates, so every validation output and loss carries a grad_fn (a graph kept for nothing).
import gc
import logging

import numpy as np
import torch
import torch.nn as nn


class SummaryWriter:
    def __init__(self, log_dir=None):
        self.log_dir = log_dir

    def add_scalars(self, *args, **kwargs):
        pass


class Args:
    summaries_dir = None
    print_progress = False


def evaluate(encoder, mlp, dataloaders, mode, epoch, args):
    ''' Evaluate script - SimCLR

        evaluate the encoder and classification head with Cross Entropy loss.
    '''

    epoch_valid_loss = None  # reset loss
    epoch_valid_acc = None  # reset acc
    epoch_valid_acc_top5 = None

    ''' Loss / Criterion '''
    criterion = nn.CrossEntropyLoss()

    # initilize Variables
    args.writer = SummaryWriter(args.summaries_dir)

    # Evaluate both encoder and class head
    encoder.eval()
    mlp.eval()

    # initilize Variables
    sample_count = 0
    run_loss = 0
    run_top1 = 0.0
    run_top5 = 0.0

    eval_dataloader = dataloaders[mode]

    ''' epoch loop '''
    for i, (inputs, target) in enumerate(eval_dataloader):

        # Do not compute gradient for encoder and classification head
        encoder.zero_grad()
        mlp.zero_grad()

        # Forward pass

        h = encoder(inputs)

        output = mlp(h)

        loss = criterion(output, target)

        sample_count += inputs.size(0)

        run_loss += loss.item()

        predicted = output.argmax(-1)

        acc = (predicted == target).sum().item() / target.size(0)

        run_top1 += acc

        _, output_topk = output.topk(5, 1, True, True)

        acc_top5 = (output_topk == target.view(-1, 1).expand_as(output_topk)
                    ).sum().item() / target.size(0)  # num corrects

        run_top5 += acc_top5

    epoch_valid_loss = run_loss / len(dataloaders[mode])  # sample_count

    epoch_valid_acc = run_top1 / len(dataloaders[mode])

    epoch_valid_acc_top5 = run_top5 / len(dataloaders[mode])

    if args.print_progress:
        logging.info('\n[{}] loss: {:.4f},\t acc: {:.4f},\t acc_top5: {:.4f} \n'.format(
            mode, epoch_valid_loss, epoch_valid_acc, epoch_valid_acc_top5))

    gc.collect()  # release unreferenced memory

    return epoch_valid_loss, epoch_valid_acc, epoch_valid_acc_top5


if __name__ == "__main__":
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 32), nn.ReLU())
    mlp = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 10))
    dataloaders = {'valid': [(torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))) for _ in range(3)]}

    seen = []
    mlp.register_forward_hook(lambda m, inp, out: seen.append(out.requires_grad and out.grad_fn is not None))

    valid_loss, valid_acc, valid_acc_top5 = evaluate(encoder, mlp, dataloaders, 'valid', 0, Args())

    assert seen == [True, True, True]
    print("evidence holds: all 3 validation outputs of evaluate() carry a grad_fn although nothing is backpropagated")
