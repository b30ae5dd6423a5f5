package chattemplate

import (
	"math"
	"math/big"
)

// pyPow is float ** float. CPython calls the C library's pow, which glibc
// rounds correctly in practice; Go's math.Pow can be an ulp off. So the
// power is computed with 256-bit big.Floats (exactly for integer exponents,
// through exp(y·ln x) otherwise) and rounded once to float64.
func pyPow(x, y float64) float64 {
	if x == 0 || x == 1 || y == 0 || math.IsInf(x, 0) || math.IsNaN(x) || math.IsInf(y, 0) || math.IsNaN(y) || math.Abs(y) > 1e6 {
		return math.Pow(x, y)
	}
	if y == math.Trunc(y) && math.Abs(y) <= 1024 {
		return intPowFloat(x, int(y))
	}
	if x < 0 {
		return math.Pow(x, y) // complex in Python; refused before we get here
	}
	const prec = 256
	t := new(big.Float).SetPrec(prec).SetFloat64(y)
	t.Mul(t, bigLog(new(big.Float).SetPrec(prec).SetFloat64(x)))
	f, _ := bigExp(t).Float64()
	return f
}

func intPowFloat(x float64, n int) float64 {
	neg := n < 0
	if neg {
		n = -n
	}
	prec := uint(53*n + 64)
	prec = min(prec, 8192)
	acc := new(big.Float).SetPrec(prec).SetFloat64(1)
	base := new(big.Float).SetPrec(prec).SetFloat64(x)
	for n > 0 {
		if n&1 == 1 {
			acc.Mul(acc, base)
		}
		n >>= 1
		if n > 0 {
			base.Mul(base, base)
		}
	}
	if neg {
		acc.Quo(new(big.Float).SetPrec(prec).SetFloat64(1), acc)
	}
	f, _ := acc.Float64()
	return f
}

// atanhSeries2 is 2·atanh(z) = 2·(z + z³/3 + z⁵/5 + ...) for |z| ≤ 1/3.
func atanhSeries2(z *big.Float) *big.Float {
	prec := z.Prec()
	sum := new(big.Float).SetPrec(prec).Set(z)
	z2 := new(big.Float).SetPrec(prec).Mul(z, z)
	term := new(big.Float).SetPrec(prec).Set(z)
	eps := new(big.Float).SetPrec(prec).SetMantExp(big.NewFloat(1), -int(prec)-8)
	for k := int64(3); ; k += 2 {
		term.Mul(term, z2)
		q := new(big.Float).SetPrec(prec).Quo(term, new(big.Float).SetPrec(prec).SetInt64(k))
		sum.Add(sum, q)
		if new(big.Float).Abs(q).Cmp(eps) < 0 {
			break
		}
	}
	return sum.Add(sum, sum)
}

var ln2 = func() *big.Float {
	third := new(big.Float).SetPrec(256).Quo(big.NewFloat(1).SetPrec(256), big.NewFloat(3).SetPrec(256))
	return atanhSeries2(third) // ln 2 = 2·atanh(1/3)
}()

// bigLog is ln(x) for x > 0: x = m·2^e with m in [0.5, 1), ln m = 2·atanh((m-1)/(m+1)).
func bigLog(x *big.Float) *big.Float {
	prec := x.Prec()
	m := new(big.Float).SetPrec(prec)
	e := x.MantExp(m)
	num := new(big.Float).SetPrec(prec).Sub(m, big.NewFloat(1))
	den := new(big.Float).SetPrec(prec).Add(m, big.NewFloat(1))
	r := atanhSeries2(num.Quo(num, den))
	return r.Add(r, new(big.Float).SetPrec(prec).Mul(ln2, new(big.Float).SetInt64(int64(e))))
}

// bigExp is e^t: t = k·ln2 + r with |r| ≤ ln2/2, e^r by its Taylor series.
func bigExp(t *big.Float) *big.Float {
	prec := t.Prec()
	kf, _ := new(big.Float).Quo(t, ln2).Float64()
	k := math.Round(kf)
	r := new(big.Float).SetPrec(prec).Sub(t, new(big.Float).SetPrec(prec).Mul(ln2, big.NewFloat(k)))
	sum := new(big.Float).SetPrec(prec).SetFloat64(1)
	term := new(big.Float).SetPrec(prec).SetFloat64(1)
	eps := new(big.Float).SetPrec(prec).SetMantExp(big.NewFloat(1), -int(prec)-8)
	for i := int64(1); i < 400; i++ {
		term.Mul(term, r)
		term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(i))
		sum.Add(sum, term)
		if new(big.Float).Abs(term).Cmp(eps) < 0 {
			break
		}
	}
	return sum.SetMantExp(sum, int(k))
}
