# source: https://github.com/Vibashan/Image-Fusion-Transformer/issues/7
# category: DL303
# expect: clean
# evidence: the `with torch.no_grad():` block in train() only builds and loads the frozen auto-encoder; the forward passes of the training step run with autograd on and the fusion network's weights change at every step.
import torch
import torch.nn as nn
from torch.optim import Adam
from torch.autograd import Variable

EPSILON = 1e-5


class NestFuse_light2_nodense(nn.Module):
    def __init__(self, nb_filter, input_nc=1, output_nc=1, deepsupervision=False):
        super().__init__()
        self.enc = nn.ModuleList([nn.Conv2d(input_nc if i == 0 else nb_filter[i - 1], nb_filter[i], 3, padding=1)
                                  for i in range(4)])
        self.dec = nn.Conv2d(nb_filter[-1], output_nc, 1)

    def encoder(self, x):
        feats = []
        for conv in self.enc:
            x = torch.relu(conv(x))
            feats.append(x)
        return feats

    def decoder_eval(self, f):
        return [self.dec(f[-1])]


class Fusion_network(nn.Module):
    def __init__(self, nb_filter, f_type='res'):
        super().__init__()
        self.fuse = nn.ModuleList([nn.Conv2d(2 * c, c, 3, padding=1) for c in nb_filter])

    def forward(self, en_ir, en_vi):
        return [conv(torch.cat([a, b], 1)) for conv, a, b in zip(self.fuse, en_ir, en_vi)]


def train(original_imgs, args, alpha=700, w1=6.0, w2=3.0):
    nb_filter = [4, 6, 8, 10]
    f_type = 'res'

    with torch.no_grad():
        deepsupervision = False
        nest_model = NestFuse_light2_nodense(nb_filter, 1, 1, deepsupervision)
        nest_model.load_state_dict(args['resume_nestfuse'])
        nest_model.eval()

    fusion_model = Fusion_network(nb_filter, f_type)
    fusion_model.train()
    optimizer = Adam(fusion_model.parameters(), args['lr'])
    mse_loss = torch.nn.MSELoss()

    history = []
    for e in range(args['epochs']):
        for img_ir, img_vi in original_imgs:
            optimizer.zero_grad()
            img_ir = Variable(img_ir, requires_grad=False)
            img_vi = Variable(img_vi, requires_grad=False)

            en_ir = nest_model.encoder(img_ir)
            en_vi = nest_model.encoder(img_vi)
            f = fusion_model(en_ir, en_vi)
            outputs = nest_model.decoder_eval(f)

            x_vi = Variable(img_vi.data.clone(), requires_grad=False)
            loss1_value = 0.
            loss2_value = 0.
            for output in outputs:
                output = (output - torch.min(output)) / (torch.max(output) - torch.min(output) + EPSILON)
                loss1_value += alpha * mse_loss(output, x_vi)
                w_fea = [1, 10, 100, 1000]
                for ii in range(4):
                    loss2_value += w_fea[ii] * mse_loss(f[ii], w1 * en_ir[ii] + w2 * en_vi[ii])
            loss1_value /= len(outputs)
            loss2_value /= len(outputs)

            total_loss = loss1_value + loss2_value
            total_loss.backward()
            optimizer.step()
            history.append((total_loss.grad_fn is not None, total_loss.item()))
    return fusion_model, nest_model, history


if __name__ == "__main__":
    torch.manual_seed(0)
    pretrained = NestFuse_light2_nodense([4, 6, 8, 10]).state_dict()
    args = {'resume_nestfuse': pretrained, 'lr': 1e-3, 'epochs': 2}
    data = [(torch.rand(2, 1, 8, 8), torch.rand(2, 1, 8, 8)) for _ in range(3)]

    torch.manual_seed(1)
    init_fusion = Fusion_network([4, 6, 8, 10]).state_dict()
    torch.manual_seed(1)
    fusion_model, nest_model, history = train(data, args)

    assert all(has_graph for has_graph, _ in history)
    changed = [not torch.equal(p, init_fusion[n]) for n, p in fusion_model.state_dict().items()]
    assert all(changed), changed
    assert all(torch.equal(p, pretrained[n]) for n, p in nest_model.state_dict().items())
    print("evidence holds: %d training steps built graphs and updated every fusion_model tensor; "
          "the no_grad block only covered model construction" % len(history))
