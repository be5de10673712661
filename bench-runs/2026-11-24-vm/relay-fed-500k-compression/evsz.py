# Sums the stored records of a nostrwire database by form (raw, zstd without
# dictionary, zstd with one). Usage: python3 evsz.py DB_DIR (needs the `lmdb` package).
import lmdb, sys, collections
env = lmdb.open(sys.argv[1], readonly=True, max_dbs=64, lock=False)
ev = env.open_db(b'events', create=False)
tails = env.open_db(b'tails', create=False)
def varint(b, i):
    v=0; s=0
    while True:
        c=b[i]; i+=1; v|=(c&0x7f)<<s; s+=7
        if c<0x80: return v,i
st=collections.Counter(); by=collections.Counter(); raw=collections.Counter()
small=collections.Counter()
with env.begin() as t:
    tl={k:len(v) for k,v in t.cursor(tails)}
    for k,v in t.cursor(ev):
        hdr=v[0]; i=1+(8 if hdr&1 else 0)
        n=len(v)+tl.get(k,0)
        body=v[i:]
        if body[0]==0x01:
            cls='raw'; r=len(body)
        else:
            d,j=varint(body,1); r,j=varint(body,j); cls='dict0' if d==0 else 'dict'
        st[cls]+=1; by[cls]+=n; raw[cls]+=r
        if n<=2022: small['leaf']+=n; small['leafn']+=1
        else: small['big']+=n; small['bign']+=1
for c in st: print(f"{c:6} n {st[c]:7} stored {by[c]/1e6:8.1f} MB raw {raw[c]/1e6:8.1f} MB avg {by[c]/st[c]:7.1f} ratio {by[c]/raw[c]:.3f}")
print(small)
