# source: https://github.com/NVIDIA/DeepLearningExamples/issues/1102
# category: DL401
# expect: flag 87
# evidence: stats.device_stat('average_loss').add_(loss) adds the un-detached loss into a persistent stats tensor every step, so that tensor acquires a grad_fn chain that grows by one node per step and keeps every step's graph reachable.
import torch
import torch.nn as nn


class SyncFreeStats:
    def __init__(self):
        self.host_stats = {}
        self.device_stats = {}
        self.device_funcs = {}

    def add_stat(self, name, dtype=torch.int32, device_tensor=None, device_func=None):
        if device_tensor is not None:
            assert dtype == device_tensor.dtype, "Error: dtype do not match: {} {}".format(dtype, device_tensor.dtype)
        self.host_stats[name] = torch.zeros(1, dtype=dtype)
        self.device_stats[name] = device_tensor
        self.device_funcs[name] = device_func

    def copy_from_device(self):
        for name in self.host_stats.keys():
            if self.device_stats[name] is not None and self.device_funcs[name] is not None:
                self.host_stats[name].copy_(self.device_funcs[name](self.device_stats[name]))
            elif self.device_stats[name] is not None:
                self.host_stats[name].copy_(self.device_stats[name].detach())
            elif self.device_funcs[name] is not None:
                self.host_stats[name].copy_(self.device_funcs[name]())

    def host_stat_value(self, name):
        assert name in self.host_stats
        return self.host_stats[name].item()

    def device_stat(self, name):
        assert self.device_stats[name] is not None
        return self.device_stats[name]


class BertPretrainingCriterion(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.loss_fn = nn.CrossEntropyLoss(ignore_index=-1)
        self.vocab_size = vocab_size

    def forward(self, prediction_scores, seq_relationship_score, masked_lm_labels, next_sentence_labels):
        masked_lm_loss = self.loss_fn(prediction_scores.view(-1, self.vocab_size), masked_lm_labels.view(-1))
        next_sentence_loss = self.loss_fn(seq_relationship_score.view(-1, 2), next_sentence_labels.view(-1))
        return masked_lm_loss + next_sentence_loss


class BertForPreTraining(nn.Module):
    def __init__(self, vocab_size=32, hidden=16):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, hidden)
        self.encoder = nn.Linear(hidden, hidden)
        self.cls = nn.Linear(hidden, vocab_size)
        self.nsp = nn.Linear(hidden, 2)

    def forward(self, input_ids, token_type_ids, attention_mask):
        h = torch.tanh(self.encoder(self.embeddings(input_ids)))
        return self.cls(h), self.nsp(h[:, 0])


class GradScaler:
    def scale(self, loss):
        return loss

    def step(self, optimizer):
        optimizer.step()

    def update(self):
        pass


class Args:
    fp16 = False
    allreduce_post_accumulation_fp16 = False
    gradient_accumulation_steps = 1


def take_training_step(args, grad_scaler, model, criterion, batch, stats):
    with torch.autocast("cpu", enabled=(args.fp16 and not args.allreduce_post_accumulation_fp16)):
        prediction_scores, seq_relationship_score = model(input_ids=batch['input_ids'], token_type_ids=batch['token_type_ids'], attention_mask=batch['attention_mask'])
        loss = criterion(prediction_scores, seq_relationship_score, batch['labels'], batch['next_sentence_labels'])

    stats.device_stat('average_loss').add_(loss)
    grad_scaler.scale(loss).backward()


def take_optimizer_step(args, optimizer, grad_scaler, model, global_step):
    grad_scaler.step(optimizer)
    grad_scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return global_step + 1


def graph_depth(t):
    # length of the chain of in-place adds hanging off the stats tensor
    depth, fn = 0, t.grad_fn
    while fn is not None:
        depth += 1
        fn = fn.next_functions[0][0]
    return depth


if __name__ == "__main__":
    torch.manual_seed(0)
    args = Args()
    model = BertForPreTraining()
    criterion = BertPretrainingCriterion(32)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    grad_scaler = GradScaler()

    stats = SyncFreeStats()
    average_loss = torch.zeros(1, dtype=torch.float32)
    stats.add_stat('average_loss', dtype=torch.float32, device_tensor=average_loss)

    global_step = 0
    depths = []
    for step in range(6):
        batch = {
            'input_ids': torch.randint(0, 32, (2, 8)),
            'token_type_ids': torch.zeros(2, 8, dtype=torch.long),
            'attention_mask': torch.ones(2, 8, dtype=torch.long),
            'labels': torch.randint(0, 32, (2, 8)),
            'next_sentence_labels': torch.randint(0, 2, (2,)),
        }
        take_training_step(args, grad_scaler, model, criterion, batch, stats)
        global_step = take_optimizer_step(args, optimizer, grad_scaler, model, global_step)
        depths.append(graph_depth(stats.device_stat('average_loss')))

    stats.copy_from_device()
    assert average_loss.requires_grad and average_loss.grad_fn is not None
    assert depths == [1, 2, 3, 4, 5, 6], depths
    print("evidence holds: the average_loss stat now has a grad_fn chain that grew one node per step:", depths)
