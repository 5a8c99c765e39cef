#!/usr/bin/env python3
"""Writes the gradient size lists that bench/training_step.c reads, derived from the published
architectures (no framework needed, Python 3 standard library only):

  resnet50.tsv   torchvision.models.resnet50()        161 tensors,  25,557,032 parameters
  bert_base.tsv  transformers BertModel (bert-base-uncased, with pooler)
                                                      199 tensors, 109,482,240 parameters

One line per trainable parameter tensor, in the order the model's named_parameters() yields them
(forward order; training_step submits them in reverse, as backprop produces them):

  name<TAB>dims separated by commas

Run from anywhere: python3 bench/models/generate_sizes.py [OUTPUT_DIR] (default: this script's
directory). The generated files are committed; rerun only if this script changes.
"""
import math
import os
import sys


def resnet50():
    """torchvision ResNet-50 (v1.5: stride on the 3x3 conv), BatchNorm affine, no conv biases."""
    params = []

    def conv(name, out_ch, in_ch, k):
        params.append((name + ".weight", (out_ch, in_ch, k, k)))

    def bn(name, ch):
        params.append((name + ".weight", (ch,)))
        params.append((name + ".bias", (ch,)))

    expansion = 4
    conv("conv1", 64, 3, 7)
    bn("bn1", 64)
    inplanes = 64
    for layer, (blocks, planes) in enumerate(zip([3, 4, 6, 3], [64, 128, 256, 512]), start=1):
        for block in range(blocks):
            prefix = "layer%d.%d" % (layer, block)
            conv(prefix + ".conv1", planes, inplanes, 1)
            bn(prefix + ".bn1", planes)
            conv(prefix + ".conv2", planes, planes, 3)
            bn(prefix + ".bn2", planes)
            conv(prefix + ".conv3", planes * expansion, planes, 1)
            bn(prefix + ".bn3", planes * expansion)
            if block == 0:  # stride or width changes: the shortcut needs a projection
                conv(prefix + ".downsample.0", planes * expansion, inplanes, 1)
                bn(prefix + ".downsample.1", planes * expansion)
            inplanes = planes * expansion
    params.append(("fc.weight", (1000, 512 * expansion)))
    params.append(("fc.bias", (1000,)))
    return params


def bert_base():
    """HuggingFace BertModel(bert-base-uncased config), add_pooling_layer=True."""
    vocab, hidden, max_positions, type_vocab, layers, intermediate = 30522, 768, 512, 2, 12, 3072
    params = []

    def linear(name, out_features, in_features):
        params.append((name + ".weight", (out_features, in_features)))
        params.append((name + ".bias", (out_features,)))

    def layer_norm(name, features):
        params.append((name + ".weight", (features,)))
        params.append((name + ".bias", (features,)))

    params.append(("embeddings.word_embeddings.weight", (vocab, hidden)))
    params.append(("embeddings.position_embeddings.weight", (max_positions, hidden)))
    params.append(("embeddings.token_type_embeddings.weight", (type_vocab, hidden)))
    layer_norm("embeddings.LayerNorm", hidden)
    for i in range(layers):
        prefix = "encoder.layer.%d" % i
        linear(prefix + ".attention.self.query", hidden, hidden)
        linear(prefix + ".attention.self.key", hidden, hidden)
        linear(prefix + ".attention.self.value", hidden, hidden)
        linear(prefix + ".attention.output.dense", hidden, hidden)
        layer_norm(prefix + ".attention.output.LayerNorm", hidden)
        linear(prefix + ".intermediate.dense", intermediate, hidden)
        linear(prefix + ".output.dense", hidden, intermediate)
        layer_norm(prefix + ".output.LayerNorm", hidden)
    linear("pooler.dense", hidden, hidden)
    return params


MODELS = [
    # file, builder, tensors, parameters (published totals)
    ("resnet50.tsv", resnet50, 161, 25557032),
    ("bert_base.tsv", bert_base, 199, 109482240),
]


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for filename, build, want_tensors, want_params in MODELS:
        params = build()
        total = sum(math.prod(shape) for _, shape in params)
        assert len(params) == want_tensors, "%s: %d tensors, expected %d" % (
            filename, len(params), want_tensors)
        assert total == want_params, "%s: %d parameters, expected %d" % (
            filename, total, want_params)
        assert len({name for name, _ in params}) == len(params), filename + ": duplicate names"
        path = os.path.join(out_dir, filename)
        with open(path, "w", encoding="ascii", newline="\n") as f:
            for name, shape in params:
                f.write("%s\t%s\n" % (name, ",".join(str(d) for d in shape)))
        print("%s: %d tensors, %d parameters, %.1f MiB as float32" % (
            path, len(params), total, total * 4 / 2**20))


if __name__ == "__main__":
    main()
