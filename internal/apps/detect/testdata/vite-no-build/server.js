require("http").createServer().listen(process.env.PORT)
