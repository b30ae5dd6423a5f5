package chattemplate

// detectContentFormat mirrors vLLM's _detect_content_format
// (vllm/entrypoints/chat_utils.py): find the names that hold the messages
// list (messages, and names set from it, possibly through filters, tests or
// slices), the loop variables iterating them, and answer "openai" when some
// loop iterates such a variable's content; otherwise "string".
func detectContentFormat(body []node) string {
	var sets []*setNode
	var fors []*forNode
	walkNodes(body, func(n node) {
		switch n := n.(type) {
		case *setNode:
			if n.value != nil && n.nsAttr == "" && len(n.targets) == 1 {
				sets = append(sets, n)
			}
		case *forNode:
			fors = append(fors, n)
		}
	})
	msgVars := []string{"messages"}
	for q := 0; q < len(msgVars); q++ {
		for _, s := range sets {
			if isVarOrElemsAccess(s.value, msgVars[q], "") && s.targets[0] != msgVars[q] {
				msgVars = append(msgVars, s.targets[0])
			}
		}
	}
	var itemVars []string
	for _, f := range fors {
		for _, v := range msgVars {
			if isVarOrElemsAccess(f.iter, v, "") && len(f.targets) == 1 {
				itemVars = append(itemVars, f.targets[0])
				break
			}
		}
	}
	for _, f := range fors {
		for _, v := range itemVars {
			if isVarOrElemsAccess(f.iter, v, "content") {
				return "openai"
			}
		}
	}
	return "string"
}

func isVarOrElemsAccess(e expr, name, key string) bool {
	switch x := e.(type) {
	case *filterExpr:
		return isVarOrElemsAccess(x.arg, name, key)
	case *testExpr:
		return isVarOrElemsAccess(x.arg, name, key)
	case *sliceExpr:
		return isVarOrElemsAccess(x.obj, name, key)
	}
	if key == "" {
		n, ok := e.(*nameExpr)
		return ok && n.name == name
	}
	switch x := e.(type) {
	case *itemExpr:
		n, ok := x.obj.(*nameExpr)
		k, isLit := x.key.(*litExpr)
		return ok && n.name == name && isLit && k.v == key
	case *attrExpr:
		n, ok := x.obj.(*nameExpr)
		return ok && n.name == name && x.name == key
	}
	return false
}

// walkNodes visits every statement depth first, as jinja2's find_all does.
func walkNodes(body []node, visit func(node)) {
	for _, n := range body {
		visit(n)
		switch n := n.(type) {
		case *generationNode:
			walkNodes(n.body, visit)
		case *filterBlockNode:
			walkNodes(n.body, visit)
		case *withNode:
			walkNodes(n.body, visit)
		case *ifNode:
			for _, b := range n.bodies {
				walkNodes(b, visit)
			}
			walkNodes(n.els, visit)
		case *forNode:
			walkNodes(n.body, visit)
			walkNodes(n.els, visit)
		case *setNode:
			walkNodes(n.body, visit)
		case *macroNode:
			walkNodes(n.body, visit)
		}
	}
}
