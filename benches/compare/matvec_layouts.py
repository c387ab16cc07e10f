"""matvec on COO and CSR files against scipy's csr_array @ x (issue 10), in
memory, best of 5 alternating rounds of best-of-10 products.

    cargo run --release --example assemble_fem -- --n 92 --output DIR/fe.hrry
    target/release/coo-assembler convert DIR/fe.hrry DIR/fe_csr.hrry --to csr
    python benches/compare/matvec_layouts.py DIR
"""
import sys
import time, numpy as np, coo_assembler as ca
D = sys.argv[1]
coo=ca.open(f"{D}/fe.hrry"); csr=ca.open(f"{D}/fe_csr.hrry")
S=csr.to_scipy(); S.data=np.array(S.data)
x=np.random.default_rng(1).standard_normal(S.shape[1])
y=S@x; assert np.allclose(csr.matvec(x), y, rtol=1e-12, atol=1e-12*abs(y).max())
def best(f, n=10):
    b=1e9
    for _ in range(n):
        t=time.perf_counter(); f(); b=min(b, time.perf_counter()-t)
    return b
r={"scipy":[], "csr":[], "coo":[], "csrT":[], "scipyT":[]}
ST=S.T.tocsr()
for _ in range(5):
    r["scipy"].append(best(lambda: S@x)); r["csr"].append(best(lambda: csr.matvec(x))); r["coo"].append(best(lambda: coo.matvec(x)))
    r["scipyT"].append(best(lambda: S.T@x)); r["csrT"].append(best(lambda: csr.matvec(x, transpose=True)))
s=min(r["scipy"])
for k,v in r.items(): print(f"{k}: {min(v)*1e3:.1f} ms  scipy/this = {s/min(v):.2f}")
print("nnz", S.nnz)
