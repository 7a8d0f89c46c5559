"""glmcot.engine"""
