module nanohost

go 1.26

require github.com/spf13/cobra v1.10.2

require (
	github.com/awalterschulze/gographviz v2.0.3+incompatible // indirect
	github.com/docker/docker v28.5.2+incompatible // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mattn/go-sqlite3 v1.14.53 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
