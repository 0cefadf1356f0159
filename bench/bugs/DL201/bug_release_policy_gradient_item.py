# source: https://github.com/isayev/ReLeaSE/issues/39
# category: DL201
# expect: flag 84
# evidence: with the reported edit, rl_loss is a plain Python number: policy_gradient's rl_loss.backward() fails with AttributeError and every generator parameter owned by generator.optimizer keeps grad None and its initial value.
import random
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
random.seed(0)


class GeneratorData(object):
    def __init__(self, all_characters="<>CNO()=c1"):
        self.all_characters = all_characters

    def char_tensor(self, string):
        return torch.tensor([self.all_characters.index(c) for c in string], dtype=torch.long)


class StackAugmentedRNN(nn.Module):
    def __init__(self, n_chars, hidden_size=16, lr=0.01):
        super(StackAugmentedRNN, self).__init__()
        self.hidden_size = hidden_size
        self.has_cell = False
        self.has_stack = False
        self.encoder = nn.Embedding(n_chars, hidden_size)
        self.rnn = nn.GRUCell(hidden_size, hidden_size)
        self.decoder = nn.Linear(hidden_size, n_chars)
        self.optimizer = torch.optim.Adadelta(self.parameters(), lr=lr)

    def init_hidden(self):
        return torch.zeros(1, self.hidden_size)

    def forward(self, inp, hidden, stack):
        hidden = self.rnn(self.encoder(inp.view(1)), hidden)
        return self.decoder(hidden), hidden, stack

    def evaluate(self, data, prime_str='<', end_token='>', predict_len=8):
        with torch.no_grad():
            hidden = self.init_hidden()
            inp = data.char_tensor(prime_str)
            new_sample = prime_str
            for _ in range(predict_len):
                output, hidden, _ = self.forward(inp[-1], hidden, None)
                top_i = torch.multinomial(F.softmax(output, dim=1).view(-1), 1)[0]
                predicted_char = data.all_characters[top_i]
                new_sample += predicted_char
                inp = data.char_tensor(predicted_char)
                if predicted_char == end_token:
                    break
            if not new_sample.endswith(end_token):
                new_sample += end_token
        return new_sample


class Reinforcement(object):
    def __init__(self, generator, predictor, get_reward):
        super(Reinforcement, self).__init__()
        self.generator = generator
        self.predictor = predictor
        self.get_reward = get_reward

    def policy_gradient(self, data, n_batch=10, gamma=0.97, std_smiles=False, grad_clipping=None, **kwargs):
        rl_loss = 0
        self.generator.optimizer.zero_grad()
        total_reward = 0
        for _ in range(n_batch):
            reward = 0
            trajectory = '<>'
            while reward == 0:
                trajectory = self.generator.evaluate(data)
                reward = self.get_reward(trajectory[1:-1], self.predictor, **kwargs)
            trajectory_input = data.char_tensor(trajectory)
            discounted_reward = reward
            total_reward += reward
            hidden = self.generator.init_hidden()
            stack = None
            for p in range(len(trajectory) - 1):
                output, hidden, stack = self.generator(trajectory_input[p], hidden, stack)
                log_probs = F.log_softmax(output, dim=1)
                top_i = trajectory_input[p + 1]
                rl_loss -= (log_probs[0, top_i].item() * discounted_reward)
                discounted_reward = discounted_reward * gamma
        rl_loss = rl_loss / n_batch
        total_reward = total_reward / n_batch
        rl_loss.backward()
        if grad_clipping is not None:
            torch.nn.utils.clip_grad_norm_(self.generator.parameters(), grad_clipping)
        self.generator.optimizer.step()
        return total_reward, rl_loss.item()


def get_reward(smiles, predictor):
    return 1.0 + smiles.count('C') * 0.5


if __name__ == "__main__":
    gen_data = GeneratorData()
    my_generator = StackAugmentedRNN(n_chars=len(gen_data.all_characters))
    RL = Reinforcement(my_generator, None, get_reward)
    before = [p.detach().clone() for p in my_generator.parameters()]
    try:
        RL.policy_gradient(gen_data, n_batch=3)
        raised = None
    except AttributeError as e:
        raised = str(e)
    assert raised is not None and "backward" in raised, raised
    assert all(p.grad is None for p in my_generator.parameters())
    assert all(torch.equal(p.detach(), b) for p, b in zip(my_generator.parameters(), before))
    print("evidence holds: rl_loss carries no graph (AttributeError: %s); generator grads stay None and weights unchanged" % raised)
