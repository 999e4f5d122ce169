module early.nanohost/privatetmp

go 1.26.0
