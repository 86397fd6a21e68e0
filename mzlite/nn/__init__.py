"""Set Transformer and MZ-Set Transformer, masked, in plain PyTorch (paper Sec. 3, App. app:impl).

``mzlite.nn`` is the one import; the code lives in ``attention`` (the attention math and the
blocks), ``details`` (what a layer and a model computed on the way), ``models`` (configs,
models, the Theorem thm:separation construction), ``baselines`` (the paper's other set models),
``registry`` (every model by name, parameter matching) and ``fused`` (C++ kernels that may run
parts of ``attention`` on CPU, and the one place that decides where: measured on this machine).

Two models with the same skeleton (Lee et al. 2019; paper Sec. sec:architecture):

    InputProj -> ISAB x n_enc -> PMA_k -> SAB x n_dec -> OutputHead

``SetTransformer`` uses standard multi-head attention. ``MZSetTransformer`` carries every token as
a zonotope ``(c, G)``: centre ``c`` of shape ``(B, n, d)`` and generators ``G`` of shape
``(B, n, n_g, d)``, and replaces each attention by ``MZAttention`` (Eq. eq:mz-main), whose value
map is a context-gated matrix zonotope ``M(mu) = M_c + sum_l gamma_l(mu) M_l``.

Conventions (the same in every class and function of this module)
-----------------------------------------------------------------
- Sets are padded tensors ``x`` of shape ``(B, n, d_in)``; ``mask`` is bool ``(B, n)``, **True for
  a real element**, False for padding (``None``: all real). This is the opposite of
  ``torch.nn.MultiheadAttention``'s ``key_padding_mask`` (True = ignore), so pass ``~mask`` there.
- Masked keys get ``-inf`` before the softmax, so padding receives zero attention weight. Every
  block zeroes its outputs at padded positions; they carry no information and no pooling, gate or
  mean ever reads them. Appending padded rows never changes an output (tested). On CPU the
  MZ-Set Transformer runs the set's per-element work on the real elements only (packed,
  ``attention.Packing``; ``MZSetTransformer.pack_sets``), with the outputs of the padded layout.
- Post-LN blocks as the paper's Eq. 6-7 (its Set Transformer recap):
  ``h = LN(x_q + Attn(x_q, x_kv))``, ``out = LN(h + FFN(h))``. Lee et al.'s reference code
  (``ln=True``) differs in four places, and mzlite follows the paper in each, because the
  paper's equations and parameter counts are what the book reproduces:

  1. score scale: that code divides by ``sqrt(d)``, the full width; mzlite by ``sqrt(d_k)``,
     the head width, as Eq. eq:mz-main's ``softmax(q^T k / sqrt(d_k))`` and Vaswani et al.;
  2. residual: that code adds the *projected* query ``W_Q x_q``; mzlite adds ``x_q``, the
     block's input, as Eq. 6 (``h = LN(x_q + Attn(x_q, x_kv))`` above);
  3. output projection: that code has none; mzlite has ``W_O``, as multi-head attention has
     in Vaswani et al., and the paper's ~208K parameters need it (choice 1);
  4. rFF: that code's is one ``Linear`` + ReLU; mzlite's is ``d -> d_ff -> d`` with GELU
     (choices 1 and 5), which the paper's parameter counts and its GELU (Eq. eq:zono-proj)
     need.

  Attention is explicit (softmax of scores), not ``scaled_dot_product_attention``, so its
  weights can be returned.
- ``model(x, mask, return_details=True)`` returns ``(y, details)``; ``model.inspect(x, mask)``
  returns only ``details`` (in eval mode, without gradients): a ``SetModelDetails`` whose
  ``layers`` are ``AttentionDetails`` (``details.layer("pool").gates``; fields and shapes in
  ``mzlite.nn.details``). See ``MZSetTransformer.forward``.

Choices the paper leaves open (each one named in the code where it is made)
---------------------------------------------------------------------------
1. Block layout. Each MAB has Q/K/V/O projections with biases, an FFN ``d -> d_ff -> d`` (GELU),
   two LayerNorms and dropout on the two residual branches; PMA is a full MAB (it has an FFN); one
   SAB follows PMA. The standard model's input projection is a single ``Linear``, its head
   ``Linear(k d, d) -> GELU -> Linear(d, d_out)``. This reproduces the paper's ~208K exactly
   (207,745 for ``d_in=8, d_out=1``); two SABs after PMA would give 241,217.
2. Generator stream (MZ). Generators are aggregated with the centres' attention weights and get
   their **own bias-free** value and output weights ``W_vg, W_og`` (bias-free because a zonotope is
   unchanged when a generator flips sign; an affine bias would break that), the residuals of the
   block, and the lighter FFN ``d -> d_ff/2 -> d`` (App. app:impl, "Generator FFN"); what the
   post-LNs do to them is choice 7. Inducing points and PMA seeds are learned zonotopes (centre
   and ``n_g`` generators). With these choices MZ-Full has 370,273 parameters for ``d_in=8``
   (the paper: ~372K); with choice 7's per-row LayerNorm reading 371,809. Sharing ``W_V, W_O``
   (without bias) with the centre stream (``gen_own_weights=False``) gives 321,121, which matches
   nothing in the paper. The generators never influence the centre stream (scores, gates and
   ``o_c`` read centres only); they reach the prediction through the output head.
3. Gates. ``gamma = tanh(W_gamma cbar_kv)`` with one ``Linear(d, H L)`` (with bias) shared by the
   heads: each head's ``L`` gates read the **full d-dim** masked mean of the key/value *input*
   centres (not a per-head ``d_k`` slice, and before the value projection), so a head can gate on
   any feature. Gates are per set: shape ``(B, H, L)``.
4. Dropout (p=0.1) acts on the residual branches. In the MZ model one mask per token is shared by
   the centre and all its generators: dropout is then a random diagonal linear map applied to the
   whole zonotope (a valid zonotope operation), and it costs 1/(1+n_g) of the random numbers.
   Under choice 7's readings with a LayerNorm (``"zonotope"``, the default, and the per-row
   ``"layernorm"``), on a CPU where the fused kernels are selected (measured faster there;
   ``mzlite.nn.fused``, which says where and why) the residual, dropout and LayerNorm
   of the MZ blocks run as one fused kernel, whose masks are hashed from a seed drawn from
   torch's generator: reproducible under ``torch.manual_seed``, other numbers than
   ``bernoulli_`` draws, of the same distribution (tested); under bf16 autocast its outputs, the
   tokens between blocks, are bf16 (the eager path keeps the learned tokens' stream in float32).
   A result records which path ran (``provenance["fused_cpu_kernels"]``). Same math otherwise
   (``tests/test_fused.py``).
5. Activations: GELU in every FFN and head (the paper uses GELU in Eq. eq:zono-proj; Lee et al.
   use ReLU). Initialisation as App. app:impl: Xavier-uniform linear weights with zero biases,
   ``M_c = I``, ``M_l ~ N(0, 0.02^2)``, ``W_mix ~ N(0, 0.1^2)``; learned inducing points / seeds
   Xavier-uniform, their generators ``N(0, 0.02^2)``.
6. Variants: ``med`` is ``n_g=4, L=2`` (paper App. "MZ-Med"). For larger ``d`` the benchmark scales
   ``d_ff = 2 d``; nothing else changes.
7. Generator normalisation (``gen_norm``; the paper writes LayerNorm only for centres, Eq.
   eq:zono-proj, and says generators "start as small perturbations" and that with ``M_c = I``,
   ``M_l ~ 0`` "the block reduces to standard attention"). Default ``"zonotope"``: each post-LN
   is applied to the token zonotope as the affine map it applies to the centre (its mean, scale
   and gain, computed on the centre; ``zonotope_layer_norm``), the exact image of the token, so
   tokens stay zonotopes through every block and the IHW read by the head bounds the image.
   ``"none"``: residual only. ``"layernorm"``: a LayerNorm of its own on every generator row,
   mzlite's first reading, kept as an ablation; it makes every generator unit-RMS after the first
   block, against both initialisation claims (``mzlite.analysis.initialisation``; chapter 3 and
   the "How we read the paper" page show the numbers). Its 1,536 extra parameters are exactly
   the gap between our 370,273 and the paper's ~372K: a hint that the authors' code normalises
   generator rows with parameters of its own, which the ablation tests.
8. Generator information in the scores (``gen_qk``, tab:genqk's MZ-GenQK; app:genqk: "projections
   W_q^gen, W_k^gen of per-token interval hull widths into the attention score computation").
   Read as ``q = W_q c_q + W_q^gen w_q``, ``k = W_k c_k + W_k^gen w_k`` with ``w = sum_g |G_g|``
   the token's half-width vector (the IHW the head reads, per token), bias-free ``d x d``
   matrices in every MZ attention, **zero at initialisation**, so the model starts exactly as
   MZ-Full, and as standard attention (the paper's initialisation claim). Six MZ attentions of
   ``d = 64`` add 49,152 parameters (the paper: ~50K, 365K -> 415K). The alternatives, a
   Xavier-initialised ``W^gen`` (the scores read noise from the first step) or a scalar IHW per
   token (``d`` parameters, not ~50K), are not run. Off by default: the paper's MZAttn scores
   centres only.
9. Where the matrix zonotope acts (``layer_reading``, ``LAYER_READINGS``). The paper describes
   its layer two ways. Eq. eq:mz-main prints ``o_c = M_c c_hat`` and puts the gated
   ``gamma_l M_l c_hat`` into the generator stream only; def:relop, Fig. fig:money and the
   abstract say the matrix zonotope replaces the value projection, ``T(v_hat; S) =
   M(mu(S)) v_hat``. ``"literal"`` (default, what every result before this switch ran) reads
   the equation: the centre stream is then exactly the Set Transformer's (at any ``M_l``,
   ``W_mix``), and the matrix zonotope reaches the prediction only through the head's
   interval-hull half-width. ``"centre_adaptive"`` reads def:relop: ``o_c = M(mu) c_hat`` with
   ``M(mu) = M_c + sum_l gamma_l M_l`` evaluated at the set's gate summary (the masked mean of
   the key/value centres, choice 3), acting on the aggregated values of the centre stream; the
   generator stream is the literal one. No parameter is added, and both reduce to standard
   attention at initialisation (exactly where ``M_l = 0``; at ``M_l ~ N(0, 0.02^2)`` up to
   ``sum_l |gamma_l| |M_l c_hat|``). The fused CPU kernels serve the literal reading only; the
   centre-adaptive one runs the eager path.
"""

# What a user builds with; the blocks' internals (``Packing``, ``split_heads``, ``merge_heads``,
# ``zero_pad``) stay in ``attention``, the paper's metadata (``FAMILIES``,
# ``PAPER_COUNT_TOLERANCE``) in ``registry``: importable from there, not part of this face.
from .attention import (
    GEN_NORMS,
    ISAB,
    LAYER_READINGS,
    MAB,
    MZISAB,
    MZMAB,
    MZPMA,
    MZSAB,
    PMA,
    SAB,
    MultiheadAttention,
    MZAttention,
    ZonotopeProjection,
    attend,
    masked_mean,
    masked_softmax,
    masked_sum,
    mz_attention_reference,
    zonotope_layer_norm,
)
from .details import AttentionDetails, SetModelDetails
from .models import (
    MZSetTransformer,
    MZSetTransformerConfig,
    SetTransformer,
    SetTransformerConfig,
    Theorem3Net,
    config_dict,
    count_parameters,
    theorem3_layer,
)
from .registry import (
    MODEL_NAMES,
    MODELS,
    ModelSpec,
    build_model,
    match_width,
    model_spec,
    param_table,
)

__all__ = [
    "GEN_NORMS",
    "ISAB",
    "LAYER_READINGS",
    "MAB",
    "MZISAB",
    "MZMAB",
    "MZPMA",
    "MZSAB",
    "PMA",
    "SAB",
    "MultiheadAttention",
    "MZAttention",
    "ZonotopeProjection",
    "attend",
    "masked_mean",
    "masked_softmax",
    "masked_sum",
    "mz_attention_reference",
    "zonotope_layer_norm",
    "MZSetTransformer",
    "MZSetTransformerConfig",
    "SetTransformer",
    "SetTransformerConfig",
    "Theorem3Net",
    "config_dict",
    "count_parameters",
    "theorem3_layer",
    "MODEL_NAMES",
    "MODELS",
    "ModelSpec",
    "build_model",
    "match_width",
    "model_spec",
    "param_table",
    "AttentionDetails",
    "SetModelDetails",
]
