require("express")().listen(process.env.PORT)
