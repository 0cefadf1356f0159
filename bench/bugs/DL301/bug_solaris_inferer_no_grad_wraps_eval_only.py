# source: https://github.com/CosmiQ/solaris/issues/414
# category: DL301
# expect: flag 55, 59, 63
# evidence: Inferer.__call__ enters torch.no_grad() only around self.model.eval(), so the per-image model call runs with grad enabled: every tile prediction carries a grad_fn and autograd saves activations
import numpy as np
import torch
import torch.nn as nn


class InferenceTiler(object):
    """Cut an image into (n_tiles, C, H, W) windows."""

    def __init__(self, framework, width, height, x_step=None, y_step=None):
        self.framework = framework
        self.width = width
        self.height = height
        self.x_step = x_step or width
        self.y_step = y_step or height

    def __call__(self, im):
        c, H, W = im.shape
        tiles, refs = [], []
        for y in range(0, H - self.height + 1, self.y_step):
            for x in range(0, W - self.width + 1, self.x_step):
                tiles.append(im[:, y:y + self.height, x:x + self.width])
                refs.append((y, x))
        return np.stack(tiles), refs, (H, W)


def stitch_images(subarr_preds, idx_refs, out_width, out_height):
    out = np.zeros((subarr_preds.shape[1], out_height, out_width), dtype=np.float32)
    for pred, (y, x) in zip(subarr_preds, idx_refs):
        out[:, y:y + pred.shape[1], x:x + pred.shape[2]] = pred
    return out


class Inferer(object):
    """Object for running inference with a trained segmentation model."""

    def __init__(self, config, model):
        self.config = config
        self.batch_size = self.config['batch_size']
        self.framework = self.config['nn_framework']
        self.model = model
        self.window_step_x = self.config['data_specs']['width']
        self.window_step_y = self.config['data_specs']['height']
        self.results = {}

    def __call__(self, infer_df):
        inf_tiler = InferenceTiler(self.framework,
                                   width=self.config['data_specs']['width'],
                                   height=self.config['data_specs']['height'],
                                   x_step=self.window_step_x,
                                   y_step=self.window_step_y)
        for idx, im_path in enumerate(infer_df['image']):
            inf_input, idx_refs, (src_im_height, src_im_width) = inf_tiler(infer_df['arrays'][idx])

            if self.framework in ['torch', 'pytorch']:
                with torch.no_grad():
                    self.model.eval()
                device = torch.device('cpu')
                inf_input = torch.from_numpy(inf_input).float().to(device)
                subarr_preds = self.model(inf_input)
                subarr_preds = subarr_preds.cpu().data.numpy()
            stitched_result = stitch_images(subarr_preds, idx_refs=idx_refs,
                                            out_width=src_im_width, out_height=src_im_height)
            self.results[im_path] = stitched_result


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 1, 1), nn.Sigmoid())
    config = {'batch_size': 4, 'nn_framework': 'torch', 'data_specs': {'width': 8, 'height': 8}}
    infer_df = {'image': ['a.tif', 'b.tif', 'c.tif'],
                'arrays': [np.random.RandomState(i).rand(3, 16, 16).astype(np.float32) for i in range(3)]}
    preds = []
    model.register_forward_hook(lambda mod, inp, out: preds.append(out))
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    inferer = Inferer(config, model)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        inferer(infer_df)
    assert not model.training and len(inferer.results) == 3
    assert len(preds) == 3 and all(p.grad_fn is not None for p in preds)
    assert sum(saved) > 0
    print("evidence holds: the no_grad block covers only model.eval(); %d tile predictions carry grad_fns, %d bytes saved"
          % (len(preds), sum(saved)))
