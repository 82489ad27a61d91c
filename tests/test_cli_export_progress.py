"""Zoo exports triggered by --predict-resources report their progress, one line per export."""

from dlsched.cli.common import with_export_progress


def test_one_line_per_export_and_none_for_cached_models() -> None:
    lines: list[str] = []
    calls: list[str] = []

    def resolver(ref: str) -> str:
        calls.append(ref)
        return f"graph of {ref}"

    resolve = with_export_progress(resolver, {"ResNet-50": "resnet50", "resnet50": "resnet50", "BERT": "bert_base"},
                                   say=lines.append)
    assert resolve("ResNet-50") == "graph of ResNet-50"
    assert resolve("resnet50") == "graph of resnet50"   # same export under another name: no second line
    assert resolve("vgg16") == "graph of vgg16"         # cached: nothing to report
    assert resolve("BERT") == "graph of BERT"
    assert calls == ["ResNet-50", "resnet50", "vgg16", "BERT"]
    assert [ln.split(" (")[0] for ln in lines] == ["exported 1/2: resnet50", "exported 2/2: bert_base"]
    assert all(ln.endswith(" s)") for ln in lines)
