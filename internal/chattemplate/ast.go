package chattemplate

// Statement nodes. Whitespace control is already applied by the lexer, so
// text nodes hold exactly the bytes to print.
type node interface{}

type (
	textNode   struct{ s string }
	outputNode struct{ e expr }
	ifNode     struct {
		conds  []expr
		bodies [][]node
		els    []node
	}
	forNode struct {
		targets []string // one name, or a tuple to unpack
		iter    expr
		cond    expr // the "for x in y if cond" filter, or nil
		body    []node
		els     []node
	}
	setNode struct {
		targets []string // one name, or a tuple to unpack
		nsAttr  string   // set ns.attr = value: targets[0] is ns
		value   expr     // nil for a block set
		body    []node   // {% set x %}...{% endset %}
		filter  expr     // {% set x | f %}: filters applied to nameExpr{blockVar}
	}
	macroNode struct {
		name     string
		params   []string
		defaults []expr // aligned with the tail of params
		body     []node
	}
	generationNode struct{ body []node }
	withNode       struct {
		names  []string
		values []expr
		body   []node
	}
	filterBlockNode struct {
		filter expr // filters applied to nameExpr{blockVar}
		body   []node
	}
	breakNode    struct{}
	continueNode struct{}
)

// Expression nodes.
type expr interface{}

type (
	litExpr  struct{ v any }
	nameExpr struct{ name string }
	attrExpr struct {
		obj  expr
		name string
	}
	itemExpr  struct{ obj, key expr }
	sliceExpr struct{ obj, lo, hi, step expr }
	callExpr  struct {
		fn   expr
		args []expr
		kw   []kwArg
	}
	filterExpr struct {
		name string
		arg  expr
		args []expr
		kw   []kwArg
	}
	testExpr struct {
		name   string
		arg    expr
		args   []expr
		negate bool
	}
	binExpr struct {
		op   string
		l, r expr
	}
	unaryExpr struct {
		op string
		x  expr
	}
	compareExpr struct {
		first expr
		ops   []string
		rest  []expr
	}
	condExpr  struct{ cond, then, els expr }
	listExpr  struct{ items []expr }
	tupleExpr struct{ items []expr }
	dictExpr  struct{ keys, vals []expr }
)

// blockVar names the rendered body of a filtered block inside its filter
// expression; no template can spell it.
const blockVar = "\x00block"

type kwArg struct {
	name string
	v    expr
}
