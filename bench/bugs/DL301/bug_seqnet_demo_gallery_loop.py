# source: https://github.com/serend1p1ty/SeqNet/issues/13
# category: DL301
# expect: flag 55, 57, 59
# evidence: demo main() sets model.eval() and runs the query and every gallery image with grad enabled: the query feature and each gallery output carry grad_fns, so every image builds (and the query keeps) an autograd graph
import torch
import torch.nn as nn
import torch.nn.functional as F


class SeqNet(nn.Module):
    """Person search: detect people in a scene and embed each box (toy version)."""

    def __init__(self, num_boxes=3, feat_dim=8):
        super(SeqNet, self).__init__()
        self.num_boxes = num_boxes
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
                                      nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
        self.box_head = nn.Conv2d(16, 1, 1)
        self.embedding_head = nn.Linear(16, feat_dim)

    def forward(self, images, targets=None):
        outputs = []
        for i, img in enumerate(images):
            fmap = self.backbone(img.unsqueeze(0))[0]
            h, w = fmap.shape[1:]
            if targets is not None:
                # query: embed the whole annotated box
                pooled = [fmap.mean(dim=(1, 2))]
            else:
                scores = self.box_head(fmap.unsqueeze(0)).flatten()
                idx = scores.topk(self.num_boxes).indices
                pooled = [fmap[:, k // w, k % w] for k in idx.tolist()]
                boxes = torch.stack([torch.stack([idx % w, idx // w, idx % w + 1, idx // w + 1], 1)]).float()[0] * 4
            embeddings = F.normalize(self.embedding_head(torch.stack(pooled)), dim=1)
            if targets is not None:
                outputs.append(embeddings)
            else:
                outputs.append({"boxes": boxes, "embeddings": embeddings})
        return outputs


def visualize_result(img_path, detections, similarities):
    for detection, sim in zip(detections, similarities):
        x1, y1, x2, y2 = detection
        print("{}: box ({:.0f}, {:.0f}, {:.0f}, {:.0f}) sim {:.2f}".format(img_path, x1, y1, x2, y2, sim))


def main(gallery, query_img, device=torch.device("cpu")):
    print("Creating model")
    model = SeqNet()
    model.to(device)
    model.eval()

    query_target = [{"boxes": torch.tensor([[0, 0, 16, 32]]).to(device)}]
    query_feat = model([query_img.to(device)], query_target)[0]

    for gallery_img_path, gallery_img in gallery:
        print(f"Processing {gallery_img_path}")
        gallery_output = model([gallery_img.to(device)])[0]
        detections = gallery_output["boxes"]
        gallery_feats = gallery_output["embeddings"]

        # Compute pairwise cosine similarities,
        # which equals to inner-products, as features are already L2-normed
        similarities = gallery_feats.mm(query_feat.view(-1, 1)).squeeze()

        visualize_result(gallery_img_path, detections.cpu().numpy(), similarities)
    return model, query_feat


if __name__ == "__main__":
    torch.manual_seed(0)
    gallery = [("demo_imgs/gallery-%d.jpg" % i, torch.rand(3, 32, 16)) for i in range(3)]
    gallery_outputs = []

    def record(module, inputs, output):
        if isinstance(module, SeqNet) and len(inputs) == 1:
            gallery_outputs.extend(o["embeddings"] for o in output)

    torch.nn.modules.module.register_module_forward_hook(record)
    model, query_feat = main(gallery, torch.rand(3, 32, 16))
    assert not model.training
    assert query_feat.grad_fn is not None
    assert len(gallery_outputs) == 3 and all(e.grad_fn is not None for e in gallery_outputs)
    print("evidence holds: in eval mode the query feature and %d gallery embeddings all carry grad_fns"
          % len(gallery_outputs))
