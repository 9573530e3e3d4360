# Bank conflicts of fft.wgsl's workgroup-memory accesses (vec2<f32>: 8 bytes a lane).
# NVIDIA: 32 banks of 4 bytes; a warp's 8-byte accesses go as two half-warps, each
# conflict-free when its 16 lanes hit distinct (index mod 16) (same index: broadcast).
import sys
WG=256
def rev(x, bits): return int(format(x, f'0{bits}b')[::-1], 2) if bits else 0
def cost(addrs):
    # addrs: per lane physical vec2 index, 32 lanes; returns wavefronts
    w=0
    for h in (addrs[:16], addrs[16:]):
        banks={}
        for a in h:
            if a is None: continue
            banks.setdefault(a%16,set()).add(a)
        w+=max((len(v) for v in banks.values()), default=0)
    return w
def run(n, cc, phys):
    logn=n.bit_length()-1; logc=cc.bit_length()-1; total=n*cc
    tot=0; ideal=0
    def acc(f, count):
        nonlocal tot, ideal
        for warp in range(WG//32):
            for it in range(0, count, WG):
                addrs=[]
                for l in range(32):
                    i=it+warp*32+l
                    addrs.append(phys(f(i)) if i<count else None)
                if any(a is not None for a in addrs):
                    tot+=cost(addrs); ideal+=2
    # load: store at rev(i>>logc)*cc + c
    acc(lambda i: (rev(i>>logc, logn))*cc + (i & (cc-1)), total)
    s=1
    if logn & 1:
        acc(lambda b: ((b>>logc)<<1)*cc + (b&(cc-1)), total//2)
        acc(lambda b: ((b>>logc)<<1)*cc + (b&(cc-1)) + cc, total//2)
        s=2
    while s<logn:
        h=1<<(s-1)
        def i0(b, h=h, s=s):
            bb=b>>logc; k=bb&(h-1); p=((bb>>(s-1))<<(s+1))+k
            return p*cc+(b&(cc-1))
        for j in range(4):
            acc(lambda b, j=j, h=h: i0(b)+j*h*cc, total//4)
        s+=2
    acc(lambda i: (i>>logc)*cc + (i&(cc-1)), total)
    return tot/ideal
ident=lambda a:a
def swz(a):
    # xor the low 4 bits (bank pair) with a hash of the higher bits
    hi=a>>4
    x=(hi ^ (hi>>4) ^ (hi>>8)) & 15
    return a ^ x
def pad(a): return a + (a>>4)
for n,cc in [(2048,1),(1024,2),(512,4),(256,8),(128,16),(64,32),(32,64),(16,64)]:
    print(n,cc, "ident %.2f  swz %.2f  pad %.2f" % (run(n,cc,ident), run(n,cc,swz), run(n,cc,pad)))
