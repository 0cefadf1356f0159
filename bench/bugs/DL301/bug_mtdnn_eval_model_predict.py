# source: https://github.com/namisan/mt-dnn/pull/92
# category: DL301
# expect: flag 46, 66, 67
# evidence: predict.py runs eval_model(), whose loop calls MTDNNModel.predict per batch; predict sets network.eval() but runs the network with grad enabled, so every batch's scores carry a grad_fn and autograd saves activations (the PR wraps the call in no_grad to cut memory)
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class TaskType(object):
    Classification = 1
    Regression = 2


class SANBertNetwork(nn.Module):
    def __init__(self, vocab=30, hidden=16, n_class=3):
        super(SANBertNetwork, self).__init__()
        self.embeddings = nn.Embedding(vocab, hidden)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(hidden, 2, 32, batch_first=True), 1)
        self.scoring_list = nn.ModuleList([nn.Linear(hidden, n_class)])

    def forward(self, input_ids, token_type_ids, attention_mask, premise_mask=None, hyp_mask=None, task_id=0):
        h = self.encoder(self.embeddings(input_ids), src_key_padding_mask=attention_mask == 0)
        return self.scoring_list[task_id](h[:, 0])


class MTDNNModel(object):
    def __init__(self, opt, state_dict=None):
        self.config = opt
        self.network = SANBertNetwork()
        if state_dict:
            self.network.load_state_dict(state_dict['state'])
        self.mnetwork = self.network
        self.optimizer = torch.optim.Adamax(self.network.parameters(), lr=opt['learning_rate'])

    def predict(self, batch_meta, batch_data):
        self.network.eval()
        task_id = batch_meta['task_id']
        task_type = batch_meta['task_type']
        inputs = batch_data[:batch_meta['input_len']]
        if len(inputs) == 3:
            inputs.append(None)
            inputs.append(None)
        inputs.append(task_id)
        score = self.mnetwork(*inputs)
        if task_type == TaskType.Classification:
            score = F.softmax(score, dim=1)
        score = score.data.cpu()
        score = score.numpy()
        predict = np.argmax(score, axis=1).tolist()
        score = score.reshape(-1).tolist()
        return score, predict, batch_meta['label']


def calc_metrics(golds, predictions):
    return {'ACC': 100.0 * np.mean(np.array(golds) == np.array(predictions))}


def eval_model(model, data, use_cuda=False, with_label=True):
    predictions = []
    golds = []
    scores = []
    ids = []
    metrics = {}
    for batch_meta, batch_data in data:
        score, pred, gold = model.predict(batch_meta, batch_data)
        predictions.extend(pred)
        golds.extend(gold)
        scores.extend(score)
        ids.extend(batch_meta['uids'])
    if with_label:
        metrics = calc_metrics(golds, predictions)
    return metrics, predictions, scores, golds, ids


def make_batch(b):
    ids = torch.randint(1, 30, (2, 6))
    meta = {'task_id': 0, 'task_type': TaskType.Classification, 'input_len': 3,
            'label': [0, 2], 'uids': ['%d-0' % b, '%d-1' % b]}
    return meta, [ids, torch.zeros_like(ids), torch.ones_like(ids)]


if __name__ == "__main__":
    torch.manual_seed(0)
    model = MTDNNModel({'learning_rate': 5e-5})
    test_data = [make_batch(b) for b in range(3)]
    outputs = []
    model.network.register_forward_hook(lambda mod, inp, out: outputs.append(out))
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        test_metrics, test_predictions, scores, golds, test_ids = eval_model(model, test_data)
    assert not model.network.training and len(test_predictions) == 6
    assert len(outputs) == 3 and all(o.grad_fn is not None for o in outputs)
    assert sum(saved) > 0
    print("evidence holds: %d predict() forwards in eval mode built graphs (outputs carry grad_fns, %d bytes saved)"
          % (len(outputs), sum(saved)))
