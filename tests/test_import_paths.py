"""Upstream's import paths serve the objects of their home modules, and placeholders fail clearly.

Code written for upstream tensordict imports names from ``tensordict.utils``, ``tensordict.base``,
``tensordict._td``, ... These modules only re-export; each name must be the very object defined
in its home module, so that ``isinstance`` checks and monkeypatching agree across paths.
"""

from __future__ import annotations

import importlib
import pickle

import pytest

from tensordict.errors import NotYetAvailableError

# (upstream path, name, home module, name in the home module)
SAME_OBJECT = [
    ("tensordict", "TensorDict", "tensordict.core.dense", "TensorDict"),
    ("tensordict", "TensorDictBase", "tensordict.core.behaviour.base", "TensorDictBase"),
    ("tensordict", "TensorCollection", "tensordict.core.collection", "TensorCollection"),
    ("tensordict", "lazy_stack", "tensordict.core.functional", "lazy_stack"),
    ("tensordict", "maybe_dense_stack", "tensordict.core.functional", "maybe_dense_stack"),
    ("tensordict", "stack", "tensordict.core.behaviour.combine", "stack"),
    ("tensordict", "cat", "tensordict.core.behaviour.combine", "cat"),
    ("tensordict", "pad", "tensordict.core.behaviour.padding", "pad"),
    ("tensordict", "pad_sequence", "tensordict.core.behaviour.padding", "pad_sequence"),
    ("tensordict", "unpad_sequence", "tensordict.core.behaviour.padding", "unpad_sequence"),
    ("tensordict", "collate", "tensordict.core.behaviour.padding", "collate"),
    ("tensordict", "make_tensordict", "tensordict.core.functional", "make_tensordict"),
    ("tensordict", "merge_tensordicts", "tensordict.core.functional", "merge_tensordicts"),
    ("tensordict", "dense_stack_tds", "tensordict.core.functional", "dense_stack_tds"),
    ("tensordict", "from_dict", "tensordict.core.functional", "from_dict"),
    ("tensordict", "fromkeys", "tensordict.core.functional", "fromkeys"),
    ("tensordict", "group_by", "tensordict.core.functional", "group_by"),
    ("tensordict", "is_floating", "tensordict.core.functional", "is_floating"),
    ("tensordict", "load", "tensordict.memmap.api", "load"),
    ("tensordict", "save", "tensordict.memmap.api", "save"),
    ("tensordict", "memmap", "tensordict.memmap.api", "memmap"),
    ("tensordict", "load_memmap", "tensordict.memmap.api", "load_memmap"),
    ("tensordict", "set_lazy_legacy", "tensordict.core.options", "set_lazy_legacy"),
    ("tensordict", "set_printoptions", "tensordict.core.options", "set_printoptions"),
    ("tensordict", "KEY_SEPARATOR", "tensordict.core.keys", "KEY_SEPARATOR"),
    ("tensordict", "default_is_leaf", "tensordict.core.keys", "default_is_leaf"),
    ("tensordict", "assert_close", "tensordict.core.checks", "assert_close"),
    ("tensordict", "assert_allclose_td", "tensordict.core.checks", "assert_close"),
    (
        "tensordict",
        "parse_tensor_dict_string",
        "tensordict.core.serial.parse_repr",
        "parse_tensor_dict_string",
    ),
    ("tensordict.utils", "NestedKey", "tensordict.core.keys", "NestedKey"),
    ("tensordict.utils", "_zip_strict", "tensordict.core.functional", "zip_strict"),
    (
        "tensordict.utils",
        "_getitem_batch_size",
        "tensordict.core.batch_shape",
        "getitem_batch_size",
    ),
    ("tensordict.utils", "_shape", "tensordict.core.batch_shape", "leaf_shape"),
    ("tensordict.utils", "expand_right", "tensordict.core.batch_shape", "expand_right"),
    ("tensordict.utils", "expand_as_right", "tensordict.core.batch_shape", "expand_as_right"),
    (
        "tensordict.utils",
        "_maybe_correct_neg_dim",
        "tensordict.core.batch_shape",
        "maybe_correct_neg_dim",
    ),
    (
        "tensordict.utils",
        "convert_ellipsis_to_idx",
        "tensordict.core.batch_shape",
        "convert_ellipsis_to_idx",
    ),
    ("tensordict.utils", "_unravel_key_to_tuple", "tensordict.core.keys", "unravel_key_to_tuple"),
    ("tensordict.utils", "_is_non_tensor", "tensordict.core.keys", "is_non_tensor_class"),
    ("tensordict.utils", "_is_tensorclass", "tensordict.core.keys", "is_tensorclass_class"),
    (
        "tensordict.utils",
        "_check_recursive_properties",
        "tensordict.core.checks",
        "check_recursive_properties",
    ),
    ("tensordict.utils", "_LOCK_ERROR", "tensordict.core.behaviour.entries", "LOCK_ERROR"),
    (
        "tensordict.utils",
        "_TensorDictPropertyError",
        "tensordict.errors",
        "TensorDictPropertyError",
    ),
    ("tensordict.utils", "isin", "tensordict.core.functional", "isin"),
    ("tensordict.utils", "remove_duplicates", "tensordict.core.functional", "remove_duplicates"),
    ("tensordict.utils", "strtobool", "tensordict.core.options", "strtobool"),
    ("tensordict.utils", "logger", "tensordict.core.options", "logger"),
    ("tensordict.utils", "print_directory_tree", "tensordict.memmap.tree", "print_directory_tree"),
    ("tensordict.utils", "_get_shared_executor", "tensordict.memmap.executor", "shared_executor"),
    ("tensordict.utils", "_make_cache_key", "tensordict.core.functional", "make_cache_key"),
    (
        "tensordict.utils",
        "NUMPY_TO_TORCH_DTYPE_DICT",
        "tensordict.core.functional",
        "NUMPY_TO_TORCH_DTYPE_DICT",
    ),
    ("tensordict.utils", "is_non_tensor", "tensordict.core.nontensor.data", "is_non_tensor"),
    ("tensordict.utils", "is_tensorclass", "tensordict.tensorclass.builder", "is_tensorclass"),
    ("tensordict.utils", "implement_for", "pyvers", "implement_for"),
    ("tensordict.base", "TensorDictBase", "tensordict.core.behaviour.base", "TensorDictBase"),
    (
        "tensordict.base",
        "is_tensor_collection",
        "tensordict.core.behaviour.base",
        "is_tensor_collection",
    ),
    ("tensordict.base", "NO_DEFAULT", "tensordict.core.behaviour.entries", "NO_DEFAULT"),
    (
        "tensordict.base",
        "_NESTED_TENSORS_AS_LISTS",
        "tensordict.core.keys",
        "NESTED_TENSORS_AS_LISTS",
    ),
    ("tensordict.base", "_default_is_leaf", "tensordict.core.keys", "default_is_leaf"),
    ("tensordict.base", "_is_leaf_nontensor", "tensordict.core.keys", "is_leaf_nontensor"),
    ("tensordict.base", "_GENERIC_NESTED_ERR", "tensordict.core.keys", "GENERIC_NESTED_ERR"),
    ("tensordict.base", "get_defaults_to_none", "tensordict.core.options", "get_defaults_to_none"),
    ("tensordict.tensordict", "TensorDict", "tensordict.core.dense", "TensorDict"),
    (
        "tensordict.tensordict",
        "LazyStackedTensorDict",
        "tensordict.core.lazy.stack",
        "LazyStackedTensorDict",
    ),
    ("tensordict._td", "TensorDict", "tensordict.core.dense", "TensorDict"),
    ("tensordict._td", "lazy_stack", "tensordict.core.functional", "lazy_stack"),
    (
        "tensordict._td",
        "is_tensor_collection",
        "tensordict.core.behaviour.base",
        "is_tensor_collection",
    ),
    (
        "tensordict._lazy",
        "LazyStackedTensorDict",
        "tensordict.core.lazy.stack",
        "LazyStackedTensorDict",
    ),
    ("tensordict._torch_func", "_stack", "tensordict.core.behaviour.combine", "private_stack"),
    ("tensordict._torch_func", "_cat", "tensordict.core.behaviour.combine", "private_cat"),
    ("tensordict._C", "_unravel_key_to_tuple", "tensordict.core.keys", "unravel_key_to_tuple"),
    ("tensordict._C", "unravel_key_list", "tensordict.core.keys", "unravel_key_list"),
    ("tensordict.functional", "pad", "tensordict.core.behaviour.padding", "pad"),
    (
        "tensordict.functional",
        "merge_tensordicts",
        "tensordict.core.functional",
        "merge_tensordicts",
    ),
    ("tensordict.testing", "assert_allclose_td", "tensordict.core.checks", "assert_close"),
    (
        "tensordict._tensorcollection",
        "TensorCollection",
        "tensordict.core.collection",
        "TensorCollection",
    ),
    ("tensordict._reductions", "_reduce_td", "tensordict.core.serial.pickling", "reduce_td"),
    ("tensordict.memmap", "MemoryMappedTensor", "tensordict.memmap.tensor", "MemoryMappedTensor"),
    ("tensordict.memmap", "_is_writable", "tensordict.memmap.format", "is_writable"),
    ("tensordict.tensorclass", "NonTensorData", "tensordict.core.nontensor.data", "NonTensorData"),
    ("tensordict", "MetaData", "tensordict.core.nontensor.data", "MetaData"),
    ("tensordict", "UnbatchedTensor", "tensordict.core.unbatched", "UnbatchedTensor"),
    ("tensordict", "TypedTensorDict", "tensordict.core.typed", "TypedTensorDict"),
    ("tensordict", "TensorDictParams", "tensordict.nn.params", "TensorDictParams"),
    ("tensordict", "from_module", "tensordict.nn.functional_modules", "from_module"),
    (
        "tensordict.utils",
        "_BatchedUninitializedParameter",
        "tensordict.nn.functional_modules",
        "BatchedUninitializedParameter",
    ),
    (
        "tensordict.utils",
        "_BatchedUninitializedBuffer",
        "tensordict.nn.functional_modules",
        "BatchedUninitializedBuffer",
    ),
    ("tensordict._utils_options", "_REPR_OPTIONS", "tensordict.core.options", "_PRINT_OPTIONS"),
    ("tensordict._utils_options", "_legacy_lazy", "tensordict.core.options", "mark_legacy_lazy"),
    ("tensordict._utils_options", "lazy_legacy", "tensordict.core.options", "lazy_legacy"),
    (
        "tensordict._utils_options",
        "set_printoptions",
        "tensordict.core.options",
        "set_printoptions",
    ),
    ("tensordict.utils", "_REPR_OPTIONS", "tensordict.core.options", "_PRINT_OPTIONS"),
    ("tensordict.utils", "_legacy_lazy", "tensordict.core.options", "mark_legacy_lazy"),
    ("tensordict._utils_key_json", "json_dumps", "tensordict.core.options", "json_dumps"),
    (
        "tensordict._utils_key_json",
        "set_json_backend",
        "tensordict.core.options",
        "set_json_backend",
    ),
    (
        "tensordict._utils_key_json",
        "get_json_backend",
        "tensordict.core.options",
        "get_json_backend",
    ),
    ("tensordict._utils_key_json", "_json_dumps", "tensordict.core.options", "json_dumps"),
    ("tensordict.utils", "_json_dumps", "tensordict.core.options", "json_dumps"),
    (
        "tensordict._utils_key_json",
        "_is_safe_legacy_key",
        "tensordict.memmap.format",
        "safe_legacy_name",
    ),
    ("tensordict.utils", "_is_safe_legacy_key", "tensordict.memmap.format", "safe_legacy_name"),
    (
        "tensordict.utils",
        "_get_robust_key_setting",
        "tensordict.memmap.format",
        "robust_key_setting",
    ),
    (
        "tensordict.utils",
        "_get_robust_key_setting_with_warning",
        "tensordict.memmap.format",
        "robust_key_setting_for",
    ),
    (
        "tensordict._utils_key_json",
        "_encode_key_for_filesystem",
        "tensordict.memmap.tree",
        "encode_key_for_filesystem",
    ),
    (
        "tensordict._utils_key_json",
        "_decode_key_from_filesystem",
        "tensordict.memmap.tree",
        "decode_key",
    ),
]


@pytest.mark.parametrize(("path", "name", "home", "home_name"), SAME_OBJECT)
def test_upstream_path_serves_the_object_of_its_home(
    path: str, name: str, home: str, home_name: str
) -> None:
    served = getattr(importlib.import_module(path), name)
    assert served is getattr(importlib.import_module(home), home_name)


def _pairs(listing: str) -> list[tuple[str, str]]:
    out = []
    for line in listing.strip().splitlines():
        module, names = line.split(":")
        out.extend((module.strip(), n) for n in names.split())
    return out


# what upstream's core test files and TorchRL 0.14.1 import at module level (not nn's modules)
CLIENT_IMPORTS = _pairs(
    """
    tensordict: LazyStackedTensorDict MemoryMappedTensor MetaData NestedKey NonTensorData
    tensordict: NonTensorStack PersistentTensorDict TensorAttrs TensorClass TensorDict
    tensordict: TensorDictBase TensorDictParams TypedTensorDict UnbatchedTensor is_memmap_archive
    tensordict: pack_memmap refresh_archive_checksums unpack_memmap from_module
    tensordict._archive: _ArchiveReader
    tensordict._lazy: _CustomOpTensorDict _PermutedTensorDict _ViewedTensorDict
    tensordict._td: _SubTensorDict _str_to_index
    tensordict.base: _is_leaf_nontensor
    tensordict.nn: TensorDictParams TensorDictModule TensorDictModuleBase dispatch InteractionType
    tensordict.nn.params: TensorDictParams
    tensordict.nn.common: TensorDictModule TensorDictModuleWrapper
    tensordict.nn.probabilistic: interaction_type set_interaction_type
    tensordict.nn.utils: _set_dispatch_td_nn_modules set_skip_existing mappings Buffer
    tensordict.nn.distributions: Delta NormalParamExtractor
    tensordict.persistent: PersistentTensorDict _has_h5
    tensordict.store: TensorDictStore
    tensordict.store._store: _has_redis
    tensordict.tensorclass: MetaData NonTensorDataBase from_dataclass _METHOD_FROM_TD
    tensordict.utils: LinkedList TensorDictFuture _pass_through _decode_key_from_filesystem
    tensordict._unbatched: UnbatchedTensor
    """
)


@pytest.mark.parametrize(("path", "name"), CLIENT_IMPORTS)
def test_client_import_resolves(path: str, name: str) -> None:
    assert hasattr(importlib.import_module(path), name)


def test_every_upstream_top_level_name_exists() -> None:
    import tensordict

    upstream = [
        "KEY_SEPARATOR",
        "LazyStackedTensorDict",
        "LazyStackedTensorDictStore",
        "MemoryMappedTensor",
        "MetaData",
        "NestedKey",
        "NonTensorData",
        "NonTensorDataBase",
        "NonTensorStack",
        "PackLayout",
        "PersistentTensorDict",
        "TensorAttrs",
        "TensorClass",
        "TensorClassModuleBase",
        "TensorClassModuleWrapper",
        "TensorCollection",
        "TensorDict",
        "TensorDictBase",
        "TensorDictParams",
        "TensorDictStore",
        "TypedTensorDict",
        "UnbatchedTensor",
        "append_memmap",
        "as_tensordict_module",
        "assert_allclose_td",
        "assert_close",
        "base",
        "capture_non_tensor_stack",
        "cat",
        "collate",
        "default_is_leaf",
        "dense_stack_tds",
        "from_any",
        "from_arrow",
        "from_consolidated",
        "from_csv",
        "from_dataclass",
        "from_dict",
        "from_h5",
        "from_json",
        "from_module",
        "from_modules",
        "from_namedtuple",
        "from_pandas",
        "from_parquet",
        "from_pytree",
        "from_safetensors",
        "from_struct_array",
        "from_tuple",
        "from_zarr",
        "fromkeys",
        "functional",
        "get_defaults_to_none",
        "get_printoptions",
        "group_by",
        "is_bool",
        "is_floating",
        "is_inexact",
        "is_integer",
        "is_leaf_nontensor",
        "is_memmap_archive",
        "is_non_tensor",
        "is_tensor_collection",
        "is_tensorclass",
        "lazy_legacy",
        "lazy_stack",
        "list_to_stack",
        "load",
        "load_memmap",
        "make_tensordict",
        "maybe_dense_stack",
        "memmap",
        "merge_tensordicts",
        "nn",
        "pack_memmap",
        "pad",
        "pad_sequence",
        "parse_tensor_dict_string",
        "persistent",
        "refresh_archive_checksums",
        "save",
        "set_capture_non_tensor_stack",
        "set_get_defaults_to_none",
        "set_lazy_legacy",
        "set_list_to_stack",
        "set_printoptions",
        "stack",
        "store",
        "tensorclass",
        "tensordict",
        "to_arrow",
        "to_safetensors",
        "typedtensordict",
        "unpack_memmap",
        "unpad_sequence",
        "unravel_key",
        "unravel_key_list",
        "unravel_key_to_tuple",
        "utils",
    ]
    assert len(upstream) == 99
    missing = [n for n in upstream if not hasattr(tensordict, n)]
    assert missing == []
    assert set(upstream) <= set(tensordict.__all__)


def test_a_missing_private_attribute_is_a_plain_attribute_error() -> None:
    from tensordict.utils import TensorDictFuture

    # pytest, pickle, typing and hasattr() probe dunder/private attributes: those stay normal
    assert not hasattr(TensorDictFuture, "_not_there")
    assert pickle.loads(pickle.dumps(NotYetAvailableError("x"))).args == ("x",)


def test_has_h5_reports_whether_h5py_is_installed() -> None:
    from importlib.util import find_spec

    from tensordict.persistent import _has_h5

    assert _has_h5 is (find_spec("h5py") is not None)


# class -> the module it is shown under (upstream's): pickles and ``repr(type)`` use it
PUBLISHED = [
    ("TensorDict", "tensordict._td"),
    ("LazyStackedTensorDict", "tensordict._lazy"),
    ("NonTensorData", "tensordict.tensorclass"),
    ("NonTensorStack", "tensordict.tensorclass"),
    ("MetaData", "tensordict.tensorclass"),
    ("UnbatchedTensor", "tensordict._unbatched"),
    ("MemoryMappedTensor", "tensordict.memmap"),
    ("TensorDictBase", "tensordict.base"),
    ("TensorCollection", "tensordict._tensorcollection"),
    ("TypedTensorDict", "tensordict.typedtensordict"),
    ("PersistentTensorDict", "tensordict.persistent"),
    ("TensorClass", "tensordict.tensorclass"),
]


@pytest.mark.parametrize(("name", "module"), PUBLISHED)
def test_classes_are_shown_under_upstreams_module_and_found_there(name: str, module: str) -> None:
    import tensordict

    cls = getattr(tensordict, name)
    assert cls.__module__ == module
    assert getattr(importlib.import_module(module), name) is cls


@pytest.mark.parametrize("module", ["tensordict._utils_options", "tensordict._utils_key_json"])
def test_utils_split_modules_serve_what_utils_serves(module: str) -> None:
    import warnings

    import tensordict.utils

    split = importlib.import_module(module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the deprecated JSON helpers
        for name in split.__all__:
            assert getattr(tensordict.utils, name) is getattr(split, name)


# the switches and print options are shown under tensordict.utils (upstream's home of them)
OPTIONS_IN_UTILS = [
    "capture_non_tensor_stack",
    "get_printoptions",
    "lazy_legacy",
    "list_to_stack",
    "set_capture_non_tensor_stack",
    "set_lazy_legacy",
    "set_list_to_stack",
    "set_printoptions",
    "_legacy_lazy",
]


@pytest.mark.parametrize("name", OPTIONS_IN_UTILS)
def test_options_are_shown_under_tensordict_utils(name: str) -> None:
    import tensordict.utils

    assert getattr(tensordict.utils, name).__module__ == "tensordict.utils"


def test_publish_as_lists_only_the_methods_whose_examples_run_in_the_defining_module() -> None:
    from tensordict.core import options
    from tensordict.core.collection import publish_as

    def own(self: object) -> None:
        pass

    own.__doc__ = ">>> 1 + 1"  # set here: pytest would collect it as this module's doctest
    # strtobool (with examples) is defined in core.options: doctest runs it there
    published = type("Published", (), {"own": own, "forwarded": options.strtobool})
    found = publish_as("somewhere.else", published)
    assert published.__module__ == "somewhere.else"
    assert found == {"Published.own": own}


TD_FUNCTIONS = [
    "append_memmap",
    "cat",
    "from_consolidated",
    "from_module",
    "from_modules",
    "from_pytree",
    "fromkeys",
    "lazy_stack",
    "load",
    "load_memmap",
    "maybe_dense_stack",
    "memmap",
    "save",
    "stack",
]


@pytest.mark.parametrize("name", TD_FUNCTIONS)
def test_td_functions_are_shown_under_tensordict_td_and_served_everywhere(name: str) -> None:
    import tensordict
    from tensordict import _td, _td_functions

    func = getattr(_td_functions, name)
    assert func.__module__ == "tensordict._td"
    assert getattr(_td, name) is func
    assert getattr(tensordict, name) is func
    assert sorted(_td_functions.__all__) == TD_FUNCTIONS


def test_type_hints_of_user_classes_resolve_through_the_published_bases() -> None:
    # the bases' own annotations are evaluated where the bases are shown (tensordict.tensorclass,
    # tensordict.typedtensordict): they must not need names of their defining modules
    from tensordict import TensorClass, TypedTensorDict

    namespace: dict = {"TensorClass": TensorClass, "TypedTensorDict": TypedTensorDict}
    source = (
        "import torch\n"
        "class Sample(TensorClass):\n    obs: torch.Tensor\n"
        "class State(TypedTensorDict):\n    obs: torch.Tensor\n"
    )
    # evaluated annotations (this module's ``from __future__`` is not inherited)
    exec(compile(source, "<classes>", "exec", dont_inherit=True), namespace)
    import typing

    import torch

    assert typing.get_type_hints(namespace["Sample"])["obs"] is torch.Tensor
    assert typing.get_type_hints(namespace["State"])["obs"] is torch.Tensor
