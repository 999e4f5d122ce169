module github.com/awalterschulze/gographviz

go 1.18
