# source: https://github.com/GitHub-HongweiZhang/prediction-flow/pull/10
# category: DL201
# expect: flag 139
# evidence: fit() with auxiliary_loss_rate=1.0 leaves every AuxiliaryNet weight with grad None and unchanged, since DIEN.forward rebuilds the auxiliary loss with torch.tensor(...).
"""
Deep Interest Evolution Network (prediction_flow/pytorch/dien.py, nn/interest.py,
functions.py before the "fix auxiliary loss" commit); sequences are fixed length here.
"""
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
from torch.functional import F


class AttentionGroup(object):
    def __init__(self, name, pairs, hidden_layers, gru_type='GRU'):
        self.name = name
        self.pairs = pairs
        self.hidden_layers = hidden_layers
        self.gru_type = gru_type

    @property
    def pairs_count(self):
        return len(self.pairs)


class AuxiliaryNet(nn.Module):
    def __init__(self, input_size, hidden_layers, activation='sigmoid'):
        super(AuxiliaryNet, self).__init__()
        modules = OrderedDict()
        previous_size = input_size
        for index, hidden_layer in enumerate(hidden_layers):
            modules[f"dense{index}"] = nn.Linear(previous_size, hidden_layer)
            modules[f"activation{index}"] = nn.Sigmoid()
            previous_size = hidden_layer
        modules["final_layer"] = nn.Linear(previous_size, 1)
        self._sequential = nn.Sequential(modules)

    def forward(self, input):
        return torch.sigmoid(self._sequential(input))


class Attention(nn.Module):
    def __init__(self, input_size, hidden_layers):
        super(Attention, self).__init__()
        self.mlp = nn.Sequential(nn.Linear(input_size * 4, hidden_layers[0]), nn.PReLU())
        self.fc = nn.Linear(hidden_layers[-1], 1)

    def forward(self, query, keys, keys_length):
        batch_size, max_length, dim = keys.size()
        query = query.unsqueeze(1).expand(-1, max_length, -1)
        din_all = torch.cat([query, keys, query - keys, query * keys], dim=-1)
        outputs = self.fc(self.mlp(din_all.view(batch_size * max_length, -1))).view(batch_size, max_length)
        outputs = F.softmax(outputs / (dim ** 0.5), dim=1)
        return torch.matmul(outputs.unsqueeze(1), keys).squeeze(1)


class Interest(nn.Module):
    def __init__(self, input_size, gru_type='GRU', att_hidden_layers=[8], use_negsampling=False):
        super(Interest, self).__init__()
        self.gru_type = gru_type
        self.use_negsampling = use_negsampling
        self.interest_extractor = nn.GRU(input_size=input_size, hidden_size=input_size, batch_first=True)
        if self.use_negsampling:
            self.auxiliary_net = AuxiliaryNet(input_size * 2, hidden_layers=[10, 5])
        self.interest_evolution = nn.GRU(input_size=input_size, hidden_size=input_size, batch_first=True)
        self.attention = Attention(input_size=input_size, hidden_layers=att_hidden_layers)

    def auxiliary_loss(self, states, click_seq, noclick_seq, keys_length):
        batch_size, max_seq_length, embedding_size = states.size()
        mask = (torch.arange(max_seq_length).repeat(batch_size, 1) < keys_length.view(-1, 1)).float()
        click_input = torch.cat([states, click_seq], dim=-1)
        noclick_input = torch.cat([states, noclick_seq], dim=-1)
        embedding_size = embedding_size * 2
        click_p = self.auxiliary_net(click_input.view(batch_size * max_seq_length, embedding_size)).view(
            batch_size, max_seq_length)
        noclick_p = self.auxiliary_net(noclick_input.view(batch_size * max_seq_length, embedding_size)).view(
            batch_size, max_seq_length)
        click_loss = torch.log(click_p) * mask
        noclick_loss = torch.log(1.0 - noclick_p) * mask
        loss = torch.mean(click_loss + noclick_loss)
        return -loss

    def forward(self, query, keys, keys_length, neg_keys=None):
        interests, _ = self.interest_extractor(keys)
        loss = torch.tensor(0.0)
        if self.use_negsampling:
            loss = self.auxiliary_loss(interests[:, :-1, :], keys[:, 1:, :], neg_keys[:, 1:, :], keys_length - 1)
        interests, _ = self.interest_evolution(interests)
        outputs = self.attention(query, interests, keys_length)
        return outputs, loss


class DIEN(nn.Module):
    def __init__(self, vocab_sizes, attention_groups, num_classes, embedding_size, hidden_layers,
                 final_activation='sigmoid', use_negsampling=False):
        super(DIEN, self).__init__()
        self.use_negsampling = use_negsampling
        self.attention_groups = attention_groups
        self.num_classes = num_classes
        self.embedding_size = embedding_size
        self.final_activation = final_activation
        self.embeddings = nn.ModuleDict(
            {name: nn.Embedding(size, embedding_size) for name, size in vocab_sizes.items()})
        self._attention_poolings = nn.ModuleDict(
            {g.name: self.create_attention_fn(g) for g in attention_groups})
        self.mlp = nn.Sequential(nn.Linear(1 + 2 * embedding_size, hidden_layers[0]), nn.ReLU())
        self.final_layer = nn.Linear(hidden_layers[-1], 1)

    def create_attention_fn(self, attention_group):
        return Interest(attention_group.pairs_count * self.embedding_size, gru_type=attention_group.gru_type,
                        att_hidden_layers=attention_group.hidden_layers, use_negsampling=self.use_negsampling)

    def forward(self, x):
        number_inputs = [x['price'].view(-1, 1)]
        embeddings = OrderedDict()
        embeddings['item_id'] = self.embeddings['item_id'](x['item_id'])
        auxiliary_loss = []
        for attention_group in self.attention_groups:
            query = torch.cat([embeddings[pair['ad']] for pair in attention_group.pairs], dim=-1)
            pos_hist = torch.cat([self.embeddings['item_id'](x[pair['pos_hist']])
                                  for pair in attention_group.pairs], dim=-1)
            keys_length = torch.min(torch.cat([x[f"__{pair['pos_hist']}_length"].view(-1, 1)
                                               for pair in attention_group.pairs], dim=-1), dim=-1)[0]
            neg_hist = None
            if self.use_negsampling:
                neg_hist = torch.cat([self.embeddings['item_id'](x[pair['neg_hist']])
                                      for pair in attention_group.pairs], dim=-1)
            embeddings[attention_group.name], tmp_loss = (
                self._attention_poolings[attention_group.name](query, pos_hist, keys_length, neg_hist))
            auxiliary_loss.append(tmp_loss)
        emb_concat = torch.cat(number_inputs + [emb for emb in embeddings.values()], dim=-1)
        final_layer_inputs = self.mlp(emb_concat)
        output = self.final_layer(final_layer_inputs)
        if self.num_classes == 2 and self.final_activation == 'sigmoid':
            output = torch.sigmoid(output)
        return output, torch.mean(torch.tensor(auxiliary_loss))


def fit(epochs, model, loss, optimizer, train_loader, valid_loader=None, scheduler=None, notebook=False,
        auxiliary_loss_rate=0.0):
    losses = []
    for epoch in range(epochs):
        model.train()
        running_loss = 0
        auxiliary_running_loss = 0
        for index, batch in enumerate(train_loader):
            label = batch['label']
            # step 1. zero the gradients
            optimizer.zero_grad()
            # step 2. compute the output
            auxiliary_loss = torch.tensor(0.0)
            pred = model(batch)
            if isinstance(pred, tuple):
                pred, auxiliary_loss = pred
                auxiliary_running_loss += ((auxiliary_loss.item() - auxiliary_running_loss) / (index + 1))
            # step 3. compute the loss
            loss_t = loss(pred, label) + auxiliary_loss_rate * auxiliary_loss
            running_loss += (loss_t.item() - running_loss) / (index + 1)
            # step 4. use loss to produce gradients
            loss_t.backward()
            # step 5. use optimizer to take gradient step
            optimizer.step()
        train_loss, train_auxiliary_loss = running_loss, auxiliary_running_loss
        valid_loss = valid_auxiliary_loss = 0
        if valid_loader:
            model.eval()
            with torch.no_grad():
                for index, batch in enumerate(valid_loader):
                    pred, auxiliary_loss = model(batch)
                    valid_loss += loss(pred, batch['label']).item()
                    valid_auxiliary_loss += auxiliary_loss.item()
        losses.append({'train_loss': train_loss, 'valid_loss': valid_loss,
                       'train_auxiliary_loss': train_auxiliary_loss,
                       'valid_auxiliary_loss': valid_auxiliary_loss})
    return losses


def make_batch(batch_size=8, seq_len=5, n_items=20):
    return {'price': torch.rand(batch_size), 'item_id': torch.randint(0, n_items, (batch_size,)),
            'clicks': torch.randint(0, n_items, (batch_size, seq_len)),
            'neg_clicks': torch.randint(0, n_items, (batch_size, seq_len)),
            '__clicks_length': torch.full((batch_size,), seq_len),
            'label': torch.randint(0, 2, (batch_size, 1)).float()}


if __name__ == "__main__":
    torch.manual_seed(0)
    attention_group = AttentionGroup(name='group1', pairs=[{'ad': 'item_id', 'pos_hist': 'clicks',
                                                           'neg_hist': 'neg_clicks'}], hidden_layers=[8])
    model = DIEN({'item_id': 20}, [attention_group], num_classes=2, embedding_size=4, hidden_layers=[8],
                 final_activation='sigmoid', use_negsampling=True)
    loss = nn.BCELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    train_loader = [make_batch() for _ in range(4)]
    valid_loader = [make_batch() for _ in range(1)]
    aux_net = model._attention_poolings['group1'].auxiliary_net
    aux_before = [p.detach().clone() for p in aux_net.parameters()]
    mlp_before = [p.detach().clone() for p in model.mlp.parameters()]

    history = fit(3, model, loss, optimizer, train_loader, valid_loader, auxiliary_loss_rate=1.0)

    assert history[-1]['train_auxiliary_loss'] > 0
    assert all(p.grad is None for p in aux_net.parameters())
    with torch.no_grad():
        assert all(torch.equal(a, p) for a, p in zip(aux_before, aux_net.parameters()))
        assert any(not torch.equal(a, p) for a, p in zip(mlp_before, model.mlp.parameters()))
    print("evidence holds: auxiliary loss %.3f is reported but AuxiliaryNet got no gradient and never changed"
          % history[-1]['train_auxiliary_loss'])
